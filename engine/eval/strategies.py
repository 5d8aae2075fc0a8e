"""Comparison strategies: one scenario, one clock, one budget, five memory designs side by side.

A strategy turns a scenario's turns into chat calls. The driver here (`run_strategy`) owns the
conversation, the virtual clock, the sessions and the probe checks, so every strategy sees the
identical conversation at the identical times; only what reaches the chat model differs:

- `no-memory`: the newest messages of the session that fit `context_budget`, nothing else.
- `summarization`: LangChain's `SummarizationMiddleware` in a `create_agent` agent with an
  `InMemorySaver`, one thread per session (a new session starts empty: its real behaviour);
  triggered at `context_budget` tokens counted by the same `ApproxTokenCounter`.
- `bmdm` (first seed): records, retrieval only when an event fires, dense path only with the
  set-relative cosine relevance, forgetting-curve score, no dimension path.
- `dimmem` (second seed): records and tri-path retrieval, ranked by relevance alone (S = R), no
  always-inject floor, no forgetting curve.
- `memlab`: the default engine (the combination).

Probe checks are the replay's: every expected keyword against what the model saw for that probe
(its own question excluded) and against that probe's reply only (REFERENCE_NOTES §1, defect 14).
"""

from __future__ import annotations

import math
import statistics
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol
from uuid import UUID

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.core.tokens import ApproxTokenCounter, content_text
from engine.eval.scenario import Scenario, keyword_in
from engine.memory.engine import MemoryEngine
from engine.roles.bundle import Models
from engine.roles.ledger import CallRecord, Ledger

__all__ = [
    "STRATEGY_NAMES",
    "Strategy",
    "StrategyRun",
    "TurnView",
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
    "probe_recall",
    "compare_main",
]

STRATEGY_NAMES: tuple[str, ...] = ("no-memory", "summarization", "bmdm", "dimmem", "memlab")
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class TurnView:
    """What one turn of a strategy produced: the reply, the exact messages sent, its memory payload."""

    reply: str
    shown: str  # everything the model saw except this turn's own message
    prompt: list[dict[str, str]]
    payload_tokens: int
    state: dict[str, Any] = field(default_factory=dict)


def probe_recall(probes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Keyword counts over probes of the replay shape: expected, found in context, in reply, rejected served."""
    ctx = rep = total = rej = 0
    for p in probes:
        for v in p["expect"].values():
            total += 1
            ctx += bool(v["context"])
            rep += bool(v["reply"])
        rej += sum(1 for v in p["reject"].values() if v["context"] or v["reply"])
    return {"expected": total, "context": ctx, "reply": rep, "rejected_served": rej}


@dataclass
class StrategyRun:
    """One strategy on one scenario (one sample): ReplayResult-shaped probes plus cost and turns."""

    strategy: str
    scenario: str
    sample: int
    probes: list[dict[str, Any]]
    payload_tokens: int
    ledger: dict[str, dict[str, float]]
    budget: dict[str, Any]
    config: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls(self) -> dict[str, int]:
        return {role: int(v["calls"]) for role, v in sorted(self.ledger.items())}

    @property
    def input_tokens(self) -> int:
        return int(sum(v["input_tokens"] for v in self.ledger.values()))

    @property
    def output_tokens(self) -> int:
        return int(sum(v["output_tokens"] for v in self.ledger.values()))

    @property
    def cost(self) -> float:
        return float(sum(v["cost"] for v in self.ledger.values()))

    def recall(self) -> dict[str, int]:
        return probe_recall(self.probes)

    def to_dict(self, *, turns: bool = False) -> dict[str, Any]:
        out = {"strategy": self.strategy, "scenario": self.scenario, "sample": self.sample, "probes": self.probes,
               "payload_tokens": self.payload_tokens, "calls": self.calls, "input_tokens": self.input_tokens,
               "output_tokens": self.output_tokens, "cost": self.cost, "budget": self.budget}
        if turns:
            out["turns"] = self.turns
        return out


# ----------------------------------------------------------------------------- strategies


@dataclass(frozen=True, kw_only=True)
class RunContext:
    config: MemoryConfig
    clock: VirtualClock
    ledger: Ledger
    settings: Any = None  # engine.llm.ModelSettings for real/cassette models; None = scripted
    embedder: str = "hash"


class Runner(Protocol):
    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView: ...


class Strategy(Protocol):
    name: str
    description: str
    overrides: Mapping[str, Any]

    def config_for(self, base: MemoryConfig) -> MemoryConfig: ...

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]: ...

    def open(self, ctx: RunContext) -> Runner: ...


def apply_overrides(base: MemoryConfig, *layers: Mapping[str, Any]) -> MemoryConfig:
    """`base` with override layers on top; a partial table (weights, path_weights, dim_weights)
    updates the base's table instead of replacing it."""
    values: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if k in _TABLES and isinstance(v, Mapping):
                current = getattr(base, k)
                merged = dict(values.get(k) or (current.to_dict() if k == "weights" else dict(current)))
                merged.update(v)
                values[k] = merged
            else:
                values[k] = v
    return base.with_overrides(**values) if values else base


_TABLES = ("weights", "path_weights", "dim_weights")


def fit_window(messages: Sequence[Mapping[str, Any]], budget: int, counter: Any) -> list[Mapping[str, Any]]:
    """The newest messages that fit `budget` tokens; the current (last) one always stays.

    The same rule as MemoryEngine's window, so no-memory and memlab see equal windows.
    """
    kept: list[Mapping[str, Any]] = []
    used = 0
    for m in reversed(messages):
        cost = counter.count_messages([{"content": m["content"]}])
        if kept and used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    return kept


def _chat_model(settings: Any):
    if settings is None:
        from engine.roles.scripted import ScriptedChatModel

        return ScriptedChatModel()
    from engine.roles.llm import make_chat_model

    return make_chat_model(settings)


def _lc_messages(messages: Sequence[Mapping[str, str]]):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def _record(ledger: Ledger, role: str, ai: Any, latency_ms: float, settings: Any) -> None:
    if settings is not None:
        from engine.roles.llm import record_chat_call

        record_chat_call(ledger, role, ai, latency_ms, settings)
        return
    usage = getattr(ai, "usage_metadata", None) or {}
    ledger.record(CallRecord(role=role, model="scripted", input_tokens=int(usage.get("input_tokens", 0)),
                             output_tokens=int(usage.get("output_tokens", 0)), latency_ms=latency_ms))


def _role_of(message: Any) -> str:
    t = getattr(message, "type", "")
    return {"human": "user", "ai": "assistant"}.get(t, t or "user")


@dataclass(frozen=True, kw_only=True)
class NoMemoryStrategy:
    """The chat model sees only the newest messages of the session that fit the window budget."""

    name: str = "no-memory"
    description: str = "last messages of the session within context_budget; no store"
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": 0, "top_k": None}

    def open(self, ctx: RunContext) -> Runner:
        return _WindowRunner(ctx)


class _WindowRunner:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.chat = _chat_model(ctx.settings)
        self.counter = ApproxTokenCounter()
        self.history: dict[tuple[str, str], list[dict[str, str]]] = {}

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        cfg = self.ctx.config
        hist = self.history.setdefault((user_id, session_id), [])
        hist.append({"role": "user", "content": text})
        window = fit_window(hist, cfg.context_budget, self.counter)
        sent = [{"role": "system", "content": cfg.core_prompt}, *({"role": m["role"], "content": m["content"]}
                                                                  for m in window)]
        t0 = _time.perf_counter()
        ai = self.chat.invoke(_lc_messages(sent))
        _record(self.ctx.ledger, "chat", ai, (_time.perf_counter() - t0) * 1000, self.ctx.settings)
        reply = content_text(ai.content)
        hist.append({"role": "assistant", "content": reply})
        return TurnView(reply=reply, shown="\n".join(m["content"] for m in sent[:-1]), prompt=sent, payload_tokens=0,
                        state={"session_messages": len(hist) - 1, "window_messages": len(window)})


class ScriptedSummarizer:
    """Offline stand-in for a summary model (labelled, honest, lossy): keeps the user's own
    statements verbatim, newest first until `max_tokens`, and drops questions and the assistant's
    replies. It carries the statements of an earlier summary forward. The scripted chat model
    returns only "Noted." to a summary prompt (it answers from what it was shown, and the prompt
    is not a question), so it cannot write a summary itself."""

    def __init__(self, *, max_tokens: int, ledger: Ledger, counter: Any = None):
        self.max_tokens = max_tokens
        self.ledger = ledger
        self.counter = counter or ApproxTokenCounter()

    def __call__(self, messages: Sequence[Any]) -> str:
        t0 = _time.perf_counter()
        statements: list[str] = []
        for m in messages:
            text = content_text(m.content).strip()
            if getattr(m, "type", "") != "human" or not text:
                continue
            if (getattr(m, "additional_kwargs", None) or {}).get("lc_source") == "summarization":
                statements.extend(line[2:].strip() for line in text.splitlines() if line.startswith("- "))
            elif not text.rstrip().endswith(("?", "？")):
                statements.append(" ".join(text.split()))
        kept: list[str] = []
        used = self.counter.count("The user said:")
        for s in reversed(list(dict.fromkeys(statements))):
            cost = self.counter.count(f"- {s}\n")
            if used + cost > self.max_tokens:
                break
            kept.append(s)
            used += cost
        kept.reverse()
        summary = "The user said:\n" + "\n".join(f"- {s}" for s in kept) if kept else "The user said nothing to keep."
        inp = sum(self.counter.count(content_text(m.content)) for m in messages)
        self.ledger.record(CallRecord(role="summarizer", model="scripted", input_tokens=inp,
                                      output_tokens=self.counter.count(summary),
                                      latency_ms=(_time.perf_counter() - t0) * 1000))
        return summary


@dataclass(frozen=True, kw_only=True)
class SummarizationStrategy:
    """LangChain's SummarizationMiddleware around the same chat model, one thread per session."""

    name: str = "summarization"
    description: str = "LangChain SummarizationMiddleware, trigger at context_budget, one thread per session"
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": cfg.injection_budget, "top_k": None}

    def open(self, ctx: RunContext) -> Runner:
        return _SummaryRunner(ctx)


def _ledger_callback(ledger: Ledger, settings: Any):
    from langchain_core.callbacks import BaseCallbackHandler

    class _LedgerCallback(BaseCallbackHandler):
        """Records every chat-model call of the agent (main or summary) and the main call's input."""

        def __init__(self) -> None:
            self.roles: dict[UUID, tuple[str, float]] = {}
            self.last_prompt: list[Any] = []

        def on_chat_model_start(self, serialized, messages, *, run_id, metadata=None, **kwargs):
            role = "summarizer" if (metadata or {}).get("lc_source") == "summarization" else "chat"
            self.roles[run_id] = (role, _time.perf_counter())
            if role == "chat":
                self.last_prompt = list(messages[0])

        def on_llm_end(self, response, *, run_id, **kwargs):
            role, t0 = self.roles.pop(run_id, ("chat", _time.perf_counter()))
            ai = response.generations[0][0].message
            _record(ledger, role, ai, (_time.perf_counter() - t0) * 1000, settings)

        def on_llm_error(self, error, *, run_id, **kwargs):
            role, t0 = self.roles.pop(run_id, ("chat", _time.perf_counter()))
            ledger.record(CallRecord(role=role, model="real" if settings else "scripted", input_tokens=0,
                                     output_tokens=0, ok=False, error=type(error).__name__,
                                     latency_ms=(_time.perf_counter() - t0) * 1000))

    return _LedgerCallback()


class _SummaryRunner:
    def __init__(self, ctx: RunContext):
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware
        from langgraph.checkpoint.memory import InMemorySaver

        cfg = ctx.config
        self.ctx = ctx
        self.counter = ApproxTokenCounter()
        chat = _chat_model(ctx.settings)
        summarizer: Any = chat if ctx.settings is not None else ScriptedSummarizer(
            max_tokens=cfg.injection_budget, ledger=ctx.ledger, counter=self.counter)
        self.middleware = SummarizationMiddleware(
            chat, trigger=("tokens", cfg.context_budget), keep=("messages", max(1, cfg.keep_recent)),
            token_counter=self.counter.count_messages, summarizer=summarizer)
        self.agent = create_agent(chat, system_prompt=cfg.core_prompt, middleware=[self.middleware],
                                  checkpointer=InMemorySaver())
        self.callback = _ledger_callback(ctx.ledger, ctx.settings)

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        from langchain_core.messages import HumanMessage

        thread = f"{user_id}::{session_id}"
        self.callback.last_prompt = []
        out = self.agent.invoke({"messages": [HumanMessage(content=text)]},
                                config={"configurable": {"thread_id": thread}, "callbacks": [self.callback]})
        reply = content_text(out["messages"][-1].content)
        sent = self.callback.last_prompt
        last_human = max((i for i, m in enumerate(sent) if getattr(m, "type", "") == "human"), default=len(sent))
        summary = next((content_text(m.content) for m in sent
                        if (getattr(m, "additional_kwargs", None) or {}).get("lc_source") == "summarization"), "")
        prompt = [{"role": _role_of(m), "content": content_text(m.content)} for m in sent]
        shown = "\n".join(p["content"] for i, p in enumerate(prompt) if i != last_human)
        return TurnView(reply=reply, shown=shown, prompt=prompt,
                        payload_tokens=self.counter.count(summary) if summary else 0,
                        state={"thread": thread, "thread_messages": len(out["messages"]),
                               "summary": summary.removeprefix(SUMMARY_PREFIX)})


@dataclass(frozen=True, kw_only=True)
class EngineStrategy:
    """A MemoryEngine configuration: the design's config (paths, fusion, weights) plus the user's overrides."""

    name: str
    description: str
    design: Mapping[str, Any] = field(default_factory=dict)  # what makes it this design
    overrides: Mapping[str, Any] = field(default_factory=dict)  # the user's, on top

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.design, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": cfg.injection_budget, "top_k": cfg.top_k}

    def open(self, ctx: RunContext) -> Runner:
        from engine.roles.embeddings import make_embedder

        models = Models.real(ctx.settings) if ctx.settings is not None else Models.scripted()
        kw = dict(clock=ctx.clock, ledger=ctx.ledger, models=models, embedder=make_embedder(ctx.embedder))
        return _EngineRunner(MemoryEngine(ctx.config, **kw))


class _EngineRunner:
    def __init__(self, engine: MemoryEngine):
        self.engine = engine

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        r = self.engine.turn(user_id, session_id, text, name=name)
        p = r.prompt
        shown = "\n".join([p.system] + [m["content"] for m in p.messages[1:-1]])
        profile = self.engine.profile(user_id)
        state = {"event_fired": r.event_fired, "event_no": r.event_no,
                 "records": len(self.engine.records(user_id, include_invalid=False)),
                 "injected": [self.engine.store.get_records(user_id, [i])[0].content for i in p.record_ids],
                 "profile": {k: list(v) for k, v in profile.fields.items()},
                 "window_messages": len(p.messages) - 1}
        return TurnView(reply=r.reply, shown=shown, prompt=[{"role": m["role"], "content": m["content"]}
                                                            for m in p.messages],
                        payload_tokens=p.payload_tokens, state=state)


def make_strategy(name: str, overrides: Mapping[str, Any] | None = None) -> Strategy:
    """A strategy by name (see STRATEGY_NAMES) with optional config overrides for it alone."""
    key = name.strip().lower()
    ov = dict(overrides or {})
    if key == "no-memory":
        return NoMemoryStrategy(overrides=ov)
    if key == "summarization":
        return SummarizationStrategy(overrides=ov)
    if key == "bmdm":
        return EngineStrategy(
            name="bmdm", description="first seed: on-event retrieval, dense only, set-relative cosine, forgetting curve",
            design={"retrieval_policy": "on_event", "path_weights": {"bm25": 0.0, "dense": 1.0, "dim": 0.0},
                    "paths": ("dense",), "fusion": "seed"},
            overrides=ov)
    if key == "dimmem":
        return EngineStrategy(
            name="dimmem", description="second seed: records + tri-path retrieval, S = R, no floor, no decay",
            design={"weights": {"alpha": 1.0, "beta": 0.0, "gamma": 0.0}, "tune_weights": False,
                    "always_inject_types": ()},
            overrides=ov)
    if key == "memlab":
        return EngineStrategy(name="memlab", description="the default engine", overrides=ov)
    raise ConfigError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")


def parse_compare(spec: str) -> list[Strategy]:
    """`no-memory,memlab` or with per-strategy overrides `no-memory:context_budget=8000,memlab`."""
    from engine.cli import parse_sets

    out: list[Strategy] = []
    for item in (s.strip() for s in (spec or "").split(",")):
        if not item:
            continue
        name, *sets = item.split(":")
        out.append(make_strategy(name, parse_sets(sets)))
    if not out:
        raise ConfigError(f"--compare needs strategy names, e.g. --compare {','.join(STRATEGY_NAMES)}")
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"--compare lists a strategy twice ({', '.join(names)}); list each once")
    return out


# ----------------------------------------------------------------------------- the driver


def run_strategy(
    strategy: Strategy,
    scenario: Scenario,
    *,
    config: MemoryConfig | None = None,
    settings: Any = None,
    embedder: str = "hash",
    sample: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> StrategyRun:
    """Drive one scenario through one strategy: same turns, clock steps and probe checks as `replay`."""
    cfg = strategy.config_for(config or scenario.memory_config())
    clock = VirtualClock(scenario.start)
    ledger = Ledger()
    runner = strategy.open(RunContext(config=cfg, clock=clock, ledger=ledger, settings=settings, embedder=embedder))
    session_no: dict[str, int] = {}
    step = timedelta(seconds=scenario.turn_seconds)
    total = len(scenario.turns) + len(scenario.probes)
    turns: list[dict[str, Any]] = []
    done = 0

    def session(user: str) -> str:
        return f"{user}-s{session_no.setdefault(user, 1)}"

    def log(kind: str, user: str, text: str, view: TurnView) -> None:
        turns.append({"n": len(turns) + 1, "kind": kind, "at": clock.now().isoformat(), "user": user,
                      "session": session(user), "text": text, "reply": view.reply, "prompt": view.prompt,
                      "payload_tokens": view.payload_tokens, "state": view.state})

    for t in scenario.turns:
        user = t.speaker or scenario.user
        if t.new_session:
            session_no[user] = session_no.get(user, 1) + 1
        if t.text is not None:
            log("turn", user, t.text, runner.turn(user, session(user), t.text, name=t.name))
            clock.advance(t.advance if t.advance is not None else step)
        elif t.advance is not None:
            clock.advance(t.advance)
        done += 1
        if progress:
            progress(done, total)
    probes: list[dict[str, Any]] = []
    payload = 0
    for p in scenario.probes:
        user = p.speaker or scenario.user
        if p.advance is not None:
            clock.advance(p.advance)
        if p.new_session:
            session_no[user] = session_no.get(user, 1) + 1
        view = runner.turn(user, session(user), p.ask)
        log("probe", user, p.ask, view)
        payload += view.payload_tokens
        probes.append({
            "ask": p.ask,
            "user": user,
            "expect": {k: {"context": keyword_in(k, view.shown), "reply": keyword_in(k, view.reply)} for k in p.expect},
            "reject": {k: {"context": keyword_in(k, view.shown), "reply": keyword_in(k, view.reply)} for k in p.reject},
            "reply": view.reply,
            "payload_tokens": view.payload_tokens,
        })
        clock.advance(step)
        done += 1
        if progress:
            progress(done, total)
    return StrategyRun(strategy=strategy.name, scenario=scenario.name, sample=sample, probes=probes,
                       payload_tokens=payload, ledger=ledger.summary(), budget=strategy.budget(cfg),
                       config=cfg.to_dict(), turns=turns)


def compare(
    scenarios: Sequence[Scenario],
    strategies: Sequence[Strategy],
    *,
    samples: int = 1,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    settings: Any = None,
    embedder: str = "hash",
    progress: Callable[[int, int, str], None] | None = None,
) -> list[StrategyRun]:
    """Every strategy on every scenario, `samples` times, on matched budgets unless overridden."""
    if samples < 1:
        raise ConfigError(f"--samples {samples} must be at least 1")
    jobs = [(sc, st, i) for sc in scenarios for i in range(samples) for st in strategies]
    runs = []
    for done, (sc, st, i) in enumerate(jobs):
        if progress:
            progress(done, len(jobs), f"{sc.name} · {st.name}")
        base = sc.memory_config(preset=preset, overrides=overrides)
        runs.append(run_strategy(st, sc, config=base, settings=settings, embedder=embedder, sample=i))
    if progress:
        progress(len(jobs), len(jobs), "done")
    return runs


# ----------------------------------------------------------------------------- aggregation


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return 0.0, 0.0
    return statistics.fmean(xs), (statistics.pstdev(xs) if len(xs) > 1 else 0.0)


def _row(name: str, scenario: str, runs: Sequence[StrategyRun]) -> dict[str, Any]:
    ctx, rep, rej, pay, calls, tin, tout, cost = ([] for _ in range(8))
    roles: dict[str, list[int]] = {}
    expected = 0
    for r in runs:
        rc = r.recall()
        expected = rc["expected"]
        ctx.append(rc["context"] / rc["expected"] if rc["expected"] else math.nan)
        rep.append(rc["reply"] / rc["expected"] if rc["expected"] else math.nan)
        rej.append(rc["rejected_served"])
        pay.append(r.payload_tokens)
        calls.append(sum(r.calls.values()))
        tin.append(r.input_tokens)
        tout.append(r.output_tokens)
        cost.append(r.cost)
        for role, n in r.calls.items():
            roles.setdefault(role, []).append(n)
    out: dict[str, Any] = {"strategy": name, "scenario": scenario, "samples": len(runs), "expected": expected}
    for key, xs in (("context_recall", ctx), ("reply_recall", rep), ("rejected_served", rej),
                    ("payload_tokens", pay), ("calls", calls), ("input_tokens", tin), ("output_tokens", tout),
                    ("cost", cost)):
        out[key], out[key + "_std"] = _mean_std([x for x in xs if not (isinstance(x, float) and math.isnan(x))])
    out["calls_by_role"] = {role: statistics.fmean(ns) for role, ns in sorted(roles.items())}
    out["budget"] = runs[0].budget if runs else {}
    return out


def aggregate(runs: Sequence[StrategyRun]) -> list[dict[str, Any]]:
    """One row per (scenario, strategy): means and spreads (population std) over samples."""
    groups: dict[tuple[str, str], list[StrategyRun]] = {}
    for r in runs:
        groups.setdefault((r.scenario, r.strategy), []).append(r)
    return [_row(st, sc, rs) for (sc, st), rs in groups.items()]


def overall(runs: Sequence[StrategyRun]) -> list[dict[str, Any]]:
    """One row per strategy over all scenarios: keywords pooled per sample, then mean/std over samples."""
    by: dict[str, dict[int, list[StrategyRun]]] = {}
    for r in runs:
        by.setdefault(r.strategy, {}).setdefault(r.sample, []).append(r)
    rows = []
    for name, samples in by.items():
        ctx, rep, rej, pay, calls, tin, tout, cost = ([] for _ in range(8))
        roles: dict[str, list[float]] = {}
        expected = 0
        for rs in samples.values():
            rc = [r.recall() for r in rs]
            expected = sum(x["expected"] for x in rc)
            ctx.append(sum(x["context"] for x in rc) / expected if expected else 0.0)
            rep.append(sum(x["reply"] for x in rc) / expected if expected else 0.0)
            rej.append(sum(x["rejected_served"] for x in rc))
            pay.append(sum(r.payload_tokens for r in rs))
            calls.append(sum(sum(r.calls.values()) for r in rs))
            tin.append(sum(r.input_tokens for r in rs))
            tout.append(sum(r.output_tokens for r in rs))
            cost.append(sum(r.cost for r in rs))
            sample_roles: dict[str, int] = {}
            for r in rs:
                for role, n in r.calls.items():
                    sample_roles[role] = sample_roles.get(role, 0) + n
            for role, n in sample_roles.items():
                roles.setdefault(role, []).append(n)
        row: dict[str, Any] = {"strategy": name, "scenario": "(all)", "samples": len(samples), "expected": expected}
        for key, xs in (("context_recall", ctx), ("reply_recall", rep), ("rejected_served", rej),
                        ("payload_tokens", pay), ("calls", calls), ("input_tokens", tin),
                        ("output_tokens", tout), ("cost", cost)):
            row[key], row[key + "_std"] = _mean_std(xs)
        row["calls_by_role"] = {role: statistics.fmean(ns) for role, ns in sorted(roles.items())}
        budgets = {tuple(sorted(r.budget.items())) for rs in samples.values() for r in rs}
        row["budget"] = next(iter(samples.values()))[0].budget if len(budgets) == 1 else {}
        rows.append(row)
    return rows


def budget_notes(runs: Sequence[StrategyRun]) -> list[str]:
    """A line per scenario where strategies ran on unequal budgets (memory-less strategies excepted
    for the memory budget); empty when every budget matches."""
    notes = []
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r.scenario, {})[r.strategy] = r.budget
    for sc, budgets in by.items():
        for key in ("context_budget", "memory_budget", "top_k"):
            vals = {name: b.get(key) for name, b in budgets.items()
                    if b.get(key) not in (None, 0) or key == "context_budget"}
            if len(set(vals.values())) > 1:
                notes.append(f"{sc}: unequal {key}: " + ", ".join(f"{n}={v}" for n, v in vals.items()))
    return notes


# ----------------------------------------------------------------------------- the CLI


def _fmt(mean: float, std: float, pct: bool = False, digits: int = 0) -> str:
    if pct:
        s = f"{mean * 100:.0f}%"
        return s + (f" ±{std * 100:.0f}" if std else "")
    s = f"{mean:.{digits}f}"
    return s + (f" ±{std:.{digits}f}" if std else "")


_ROLE_ABBR = {"consolidator": "cons", "extractor": "ext", "query_parser": "query", "summarizer": "summ",
              "inducer": "induct", "tuner": "tune"}


def render_table(rows: Sequence[Mapping[str, Any]], title: str):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col, just in (("strategy", "left"), ("ctx recall", "right"), ("reply recall", "right"),
                      ("rejected", "right"), ("payload tok", "right"), ("calls", "right"),
                      ("calls by role", "left"), ("in tok", "right"), ("out tok", "right"), ("cost", "right"),
                      ("budget ctx/mem/k", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        b = r["budget"]
        table.add_row(
            r["strategy"], _fmt(r["context_recall"], r["context_recall_std"], pct=True),
            _fmt(r["reply_recall"], r["reply_recall_std"], pct=True),
            _fmt(r["rejected_served"], r["rejected_served_std"], digits=1 if r["rejected_served_std"] else 0),
            _fmt(r["payload_tokens"], r["payload_tokens_std"]), _fmt(r["calls"], r["calls_std"]),
            " ".join(f"{_ROLE_ABBR.get(k, k)} {v:g}" for k, v in r["calls_by_role"].items()),
            _fmt(r["input_tokens"], r["input_tokens_std"]), _fmt(r["output_tokens"], r["output_tokens_std"]),
            f"{r['cost']:.4f}", (f"{b.get('context_budget')}/{b.get('memory_budget') or '—'}/{b.get('top_k') or '—'}" if b
             else "per scenario"),
        )
    return table


def compare_main(args: Any) -> int:
    """`memlab replay SCENARIO... --compare A,B,... [--samples N] [--models ...] [--json OUT]`."""
    import json
    import sys
    from pathlib import Path

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from engine.cli import _model_factory, parse_sets
    from engine.eval.scenario import load_scenario

    strategies = parse_compare(args.compare)
    overrides = parse_sets(getattr(args, "set", None))
    settings = _model_factory(args)
    scenarios = [load_scenario(p) for p in args.scenarios]
    console = Console(width=None if sys.stdout.isatty() else 200)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("comparing", total=len(scenarios) * len(strategies) * max(1, args.samples))

        def tick(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        runs = compare(scenarios, strategies, samples=args.samples, preset=args.preset, overrides=overrides,
                       settings=settings, embedder=getattr(args, "embedder", "hash"), progress=tick)
    mode = "scripted models" if settings is None else f"{args.models}: {settings.model}"
    console.print(f"[bold]memlab compare[/bold] · {mode} · {args.samples} sample(s) · "
                  f"recall = share of expected keywords (context: what the model saw; reply: that probe's reply)")
    rows = aggregate(runs)
    for sc in scenarios:
        console.print(render_table([r for r in rows if r["scenario"] == sc.name], f"{sc.name}"))
        if getattr(args, "verbose", False):
            for r in runs:
                if r.scenario == sc.name and r.sample == 0:
                    for p in r.probes:
                        console.print(f"  {r.strategy:<14} {p['ask']} → {p['reply']}", markup=False)
    if len(scenarios) > 1:
        console.print(render_table(overall(runs), f"overall ({len(scenarios)} scenarios)"))
    notes = budget_notes(runs)
    if notes:
        console.print("[yellow]unequal budgets:[/yellow]")
        for n in notes:
            console.print(f"  {n}", markup=False)
    else:
        console.print("budgets matched: every strategy had the same context budget "
                      "(and memory budget / top_k where it has memory)")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": [r.to_dict() for r in runs]}, ensure_ascii=False, indent=2),
                                   encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0
