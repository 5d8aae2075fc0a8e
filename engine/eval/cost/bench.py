"""`memlab bench cost`: model calls and tokens per user turn, through the real client.

Every scenario is played by the one driver (engine.eval.driver) through three configurations, each
on the real LangChain client (`ChatDeepSeek` → HTTP → structured output → repairs → ledger)
pointed at a local OpenAI-compatible server that answers as the scripted roles
(`engine.eval.cost.responder`):

- `memlab`: the default engine, questions parsed by the rules first (the model only when the
  rules cannot resolve one);
- `memlab:model-parsing`: the same engine with a query-parser call every turn;
- `summarization`: LangChain's real `SummarizationMiddleware` in a `create_agent` agent on the
  same chat model (its summary call goes to the same server, which answers the middleware's own
  summary prompt as the scripted summarizer, within the memory budget).

Budgets are matched: summarization triggers at the scenario's `context_budget` and its summaries
stay within `injection_budget`, memlab's memory payload within the same `injection_budget`.
Tokens are what the server reports as a provider would (messages and tool schemas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.eval.scenario import Scenario
from engine.eval.strategies.base import Strategy, StrategyRun
from engine.eval.strategies.engine_backed import EngineStrategy
from engine.eval.strategies.run import run_strategy
from engine.eval.strategies.summarization import SummarizationStrategy

__all__ = ["CONFIGS", "CostRow", "cost_strategies", "run_cost", "summarize_rows", "INTERNAL_ROLES"]

#: The configurations compared, in table order.
CONFIGS: tuple[str, ...] = ("memlab", "memlab:model-parsing", "summarization")
#: Calls a memory design makes besides the turn's chat call.
INTERNAL_ROLES: tuple[str, ...] = ("extractor", "query_parser", "consolidator", "tuner", "inducer", "summarizer")


def cost_strategies() -> list[Strategy]:
    """The three configurations of CONFIGS."""
    return [EngineStrategy.named("memlab"),
            EngineStrategy.named("memlab", query_parsing="model", label="memlab:model-parsing"),
            SummarizationStrategy()]


@dataclass(frozen=True, kw_only=True)
class CostRow:
    """One configuration on one scenario: user turns, the ledger per role, recall."""

    config: str
    scenario: str
    turns: int
    ledger: dict[str, dict[str, float]]
    expected: int
    context: int
    reply: int
    rejected_served: int
    budget: dict[str, Any]

    @classmethod
    def of(cls, run: StrategyRun) -> CostRow:
        rc = run.recall()
        return cls(config=run.strategy, scenario=run.scenario, turns=len(run.turns), ledger=run.ledger,
                   expected=rc["expected"], context=rc["context"], reply=rc["reply"],
                   rejected_served=rc["rejected_served"], budget=run.budget)

    @property
    def summarized(self) -> bool:
        """Whether the conversation outgrew the context budget (the middleware wrote a summary)."""
        return bool(self.ledger.get("summarizer", {}).get("calls"))

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "scenario": self.scenario, "turns": self.turns, "ledger": self.ledger,
                "expected": self.expected, "context": self.context, "reply": self.reply,
                "rejected_served": self.rejected_served, "budget": self.budget}


def run_cost(scenarios: Sequence[Scenario], *, model: str = "deepseek-chat", embedder: str = "hash",
             progress: Callable[[int, int, str], None] | None = None, server: Any = None) -> list[CostRow]:
    """Every scenario through every configuration against one local scripted server (`server`, a
    running `FakeOpenAI` with a `ScriptedResponder`, or one started here)."""
    from contextlib import nullcontext

    from engine.eval.cost.responder import scripted_server
    from engine.roles.llm import ModelSettings

    strategies = cost_strategies()
    rows: list[CostRow] = []
    jobs = [(sc, st) for sc in scenarios for st in strategies]
    with nullcontext(server) if server is not None else scripted_server() as server:
        settings = ModelSettings(model=model, base_url=server.base_url)
        for done, (sc, st) in enumerate(jobs):
            if progress:
                progress(done, len(jobs), f"{sc.name} · {st.name}")
            cfg = sc.memory_config()
            server.responder.summary_tokens = cfg.injection_budget
            server.responder.seen_prefixes.clear()  # each run starts on a cold prompt cache
            rows.append(CostRow.of(run_strategy(st, sc, config=cfg, settings=settings, embedder=embedder)))
    if progress:
        progress(len(jobs), len(jobs), "done")
    return rows


def summarize_rows(rows: Sequence[CostRow]) -> dict[str, dict[str, Any]]:
    """Per configuration over `rows`: turns, calls and tokens per role, totals, per-turn rates, recall."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r.config for r in rows):
        mine = [r for r in rows if r.config == name]
        roles: dict[str, dict[str, int]] = {}
        for r in mine:
            for role, v in r.ledger.items():
                acc = roles.setdefault(role, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_hit_tokens": 0})
                for k in acc:
                    acc[k] += int(v.get(k, 0))
        turns = sum(r.turns for r in mine)
        expected = sum(r.expected for r in mine)
        internal = sum(v["calls"] for role, v in roles.items() if role in INTERNAL_ROLES)
        tin = sum(v["input_tokens"] for v in roles.values())
        hit = sum(v["cache_hit_tokens"] for v in roles.values())
        out[name] = {
            "scenarios": len(mine), "turns": turns, "roles": dict(sorted(roles.items())),
            "calls": sum(v["calls"] for v in roles.values()), "internal_calls": internal,
            "internal_calls_per_turn": internal / turns if turns else 0.0,
            "input_tokens": tin, "uncached_input_tokens": tin - hit,
            "output_tokens": sum(v["output_tokens"] for v in roles.values()),
            "expected": expected,
            "context_recall": sum(r.context for r in mine) / expected if expected else 0.0,
            "reply_recall": sum(r.reply for r in mine) / expected if expected else 0.0,
            "rejected_served": sum(r.rejected_served for r in mine),
        }
    return out
