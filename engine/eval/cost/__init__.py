"""`memlab bench cost`: calls, input and output tokens per role and per user turn, and recall, for
memlab (rules-first query parsing), memlab (a query-parser call every turn) and LangChain's real
`SummarizationMiddleware` at matched budgets, all through the real client against a local
OpenAI-compatible server answering as the scripted roles.

The modules: `server` (the local OpenAI-compatible HTTP server on 127.0.0.1), `responder` (its
"model": the scripted roles, the scripted summarizer for the middleware's summary prompt),
`bench` (the runs and their sums), `report` (the command, tables, JSON).
"""

from engine.eval.cost.bench import CONFIGS, CostRow, cost_strategies, run_cost, summarize_rows
from engine.eval.cost.report import TARGETS, cost_main, ratios, render, scenario_sets

__all__ = ["CONFIGS", "CostRow", "TARGETS", "cost_strategies", "run_cost", "summarize_rows", "render", "ratios",
           "scenario_sets", "cost_main"]
