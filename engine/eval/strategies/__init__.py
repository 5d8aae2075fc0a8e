"""Comparison strategies: one scenario, one clock, one budget, five memory designs side by side.

Every strategy is played by the one scenario driver (engine.eval.driver), so each sees the
identical conversation at the identical times and is judged by the same probe checks; only what
reaches the chat model differs:

- `no-memory` (window): the newest messages of the session that fit `context_budget`.
- `summarization`: LangChain's `SummarizationMiddleware` in a `create_agent` agent, one thread
  per session, triggered at `context_budget` tokens by the same `ApproxTokenCounter`.
- `bmdm`, `dimmem`, `memlab` (engine_backed): a `MemoryEngine` configured as each design.
"""

from engine.eval.strategies.aggregate import aggregate, budget_notes, overall
from engine.eval.strategies.base import (
    STRATEGY_NAMES,
    RunContext,
    Strategy,
    StrategyRun,
    StrategyRunner,
    apply_overrides,
)
from engine.eval.strategies.cli import compare_main, render_table
from engine.eval.strategies.engine_backed import DESIGNS, EngineStrategy
from engine.eval.strategies.run import (
    compare,
    make_strategy,
    parse_compare,
    run_strategy,
)
from engine.eval.strategies.summarization import (
    ScriptedSummarizer,
    SummarizationStrategy,
)
from engine.eval.strategies.window import NoMemoryStrategy, fit_window

__all__ = [
    "STRATEGY_NAMES",
    "DESIGNS",
    "Strategy",
    "StrategyRunner",
    "StrategyRun",
    "RunContext",
    "NoMemoryStrategy",
    "SummarizationStrategy",
    "EngineStrategy",
    "ScriptedSummarizer",
    "make_strategy",
    "parse_compare",
    "run_strategy",
    "compare",
    "aggregate",
    "overall",
    "budget_notes",
    "fit_window",
    "apply_overrides",
    "render_table",
    "compare_main",
]
