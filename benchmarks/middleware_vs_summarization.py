"""MemoryMiddleware vs LangChain's SummarizationMiddleware on one scenario, same model, same counter.

Both agents are `create_agent` graphs on the same chat model mode (scripted offline, or a real
OpenAI-compatible server with `--base-url`). Every chat and summary call is tallied by a callback
on the model with the same `ApproxTokenCounter` (input = the messages sent, output = the reply);
memlab's internal roles (extractor, query parser, consolidator, tuner, inducer) come from the
engine's ledger (the same counter offline; the provider's reported usage with a real model). The summarization trigger matches memlab's (same kind and threshold; keep =
memlab's `keep_recent` messages) and its summary model is the same model.

Sessions: the memory agent opens a new LangGraph thread for each scenario session (memory lives in
the engine's store); the summarization agent keeps ONE thread per user for the whole scenario,
its best case (a new thread would start it from nothing).

    python benchmarks/middleware_vs_summarization.py [--scenario scenarios/needle-long.yaml]
        [--base-url http://127.0.0.1:PORT/v1 --model NAME] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import SummarizationMiddleware  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from engine.core.clock import VirtualClock  # noqa: E402
from engine.core.config import MemoryConfig  # noqa: E402
from engine.core.tokens import ApproxTokenCounter, content_text  # noqa: E402
from engine.eval.scenario import Scenario, keyword_in, load_scenario, parse_scenario  # noqa: E402
from engine.integrations.langgraph import MemoryMiddleware  # noqa: E402
from engine.memory.engine import MemoryEngine, Models  # noqa: E402
from engine.roles.bundle import Models
from engine.roles.ledger import CallRecord, Ledger  # noqa: E402

DEFAULT_SCENARIO = ROOT / "scenarios" / "needle-long.yaml"
INLINE = """
name: inline-short
user: sam
preset: customer service
start: 2026-03-02T09:00:00+00:00
turn_seconds: 60
turns:
  - user: "Hi, I'm Sam. I'm allergic to peanuts."
  - user: "I prefer deliveries before 8 am."
  - user: "Do you have almond flour in stock?"
  - user: "How much is shipping for the kettle?"
  - user: "Can I pay with a gift card?"
  - advance: 2d
  - session: new
probes:
  - ask: "What am I allergic to?"
    expect: ["peanuts"]
"""
MEMORY_ROLES = ("extractor", "query_parser", "consolidator", "tuner", "inducer")


class Tally(BaseCallbackHandler):
    """Counts one model's calls with a shared token counter (same rules for both agents)."""

    def __init__(self, ledger: Ledger, role: str, counter: ApproxTokenCounter, model: str):
        self.ledger, self.role, self.counter, self.model = ledger, role, counter, model
        self._open: dict[uuid.UUID, tuple[int, float, str]] = {}
        self.last_input = ""

    def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs) -> None:
        batch = messages[0] if messages else []
        text = "\n".join(content_text(m.content) for m in batch)
        self.last_input = text
        self._open[run_id] = (self.counter.count_messages(batch), time.perf_counter(), text)

    def on_llm_end(self, response, *, run_id, **kwargs) -> None:
        tokens_in, t0, _ = self._open.pop(run_id, (0, time.perf_counter(), ""))
        gen = response.generations[0][0] if response.generations and response.generations[0] else None
        msg = getattr(gen, "message", None)
        out = content_text(getattr(msg, "content", getattr(gen, "text", "")))
        calls = getattr(msg, "tool_calls", None) or []
        if calls:
            out += json.dumps([{"name": c["name"], "args": c["args"]} for c in calls])
        self.ledger.record(CallRecord(role=self.role, model=self.model, input_tokens=tokens_in,
                                      output_tokens=self.counter.count(out),
                                      latency_ms=(time.perf_counter() - t0) * 1000))

    def on_llm_error(self, error, *, run_id, **kwargs) -> None:
        tokens_in, t0, _ = self._open.pop(run_id, (0, time.perf_counter(), ""))
        self.ledger.record(CallRecord(role=self.role, model=self.model, input_tokens=tokens_in, output_tokens=0,
                                      ok=False, error=type(error).__name__,
                                      latency_ms=(time.perf_counter() - t0) * 1000))


def matched_trigger(cfg: MemoryConfig) -> tuple[str, float]:
    """memlab's trigger as a SummarizationMiddleware ContextSize."""
    if cfg.trigger == "messages":
        return ("messages", int(cfg.trigger_threshold))
    if cfg.trigger == "tokens":
        return ("tokens", int(cfg.trigger_threshold))
    return ("tokens", int(cfg.trigger_threshold * cfg.context_budget))


def _models(base_url: str | None, model: str):
    """(chat model factory, memlab Models): scripted offline, or all roles on the server."""
    if base_url is None:
        return (lambda: Models.scripted().chat), Models.scripted(), "scripted"
    from engine.roles.llm import ModelSettings, make_chat_model

    settings = ModelSettings(model=model, base_url=base_url)
    return (lambda: make_chat_model(settings)), Models.real(settings), model


def run(scenario: Scenario, *, base_url: str | None = None, model: str = "deepseek-chat") -> dict[str, Any]:
    cfg = scenario.memory_config()
    counter = ApproxTokenCounter()
    mem_calls, sum_calls = Ledger(), Ledger()
    make_chat, models, label = _models(base_url, model)

    def tallied(ledger: Ledger, role: str) -> tuple[Any, Tally]:
        tally = Tally(ledger, role, counter, label)
        chat = make_chat()
        return chat.model_copy(update={"callbacks": [tally]}), tally

    clock = VirtualClock(scenario.start)
    engine = MemoryEngine(cfg, clock=clock, models=models, token_counter=counter)
    mem_chat, mem_tally = tallied(mem_calls, "chat")
    memory_agent = create_agent(mem_chat, tools=[], middleware=[MemoryMiddleware(engine)],
                                checkpointer=InMemorySaver())
    sum_chat, sum_tally = tallied(sum_calls, "chat")
    summary_model, _ = tallied(sum_calls, "summary")
    trigger = matched_trigger(cfg)
    summary_agent = create_agent(sum_chat, tools=[], checkpointer=InMemorySaver(), middleware=[
        SummarizationMiddleware(summary_model, trigger=trigger, keep=("messages", cfg.keep_recent),
                                token_counter=counter.count_messages)])

    session_no: dict[str, int] = {}

    def say(user: str, text: str) -> tuple[str, str, str, str]:
        thread = f"{user}-s{session_no.setdefault(user, 1)}"
        ctx = {"user_id": user}
        a = memory_agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}},
                                context=ctx)
        b = summary_agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": user}},
                                 context=ctx)
        return (content_text(a["messages"][-1].content), mem_tally.last_input,
                content_text(b["messages"][-1].content), sum_tally.last_input)

    step = timedelta(seconds=scenario.turn_seconds)
    for t in scenario.turns:
        user = t.speaker or scenario.user
        if t.new_session:
            session_no[user] = session_no.get(user, 1) + 1
        if t.text is not None:
            say(user, t.text)
            clock.advance(t.advance if t.advance is not None else step)
        elif t.advance is not None:
            clock.advance(t.advance)
    probes = []
    for p in scenario.probes:
        user = p.speaker or scenario.user
        if p.advance is not None:
            clock.advance(p.advance)
        if p.new_session:
            session_no[user] = session_no.get(user, 1) + 1
        mem_reply, mem_seen, sum_reply, sum_seen = say(user, p.ask)
        probes.append({"ask": p.ask, "expect": list(p.expect),
                       "memory": {"reply": mem_reply, "hit": all(keyword_in(k, mem_reply) for k in p.expect),
                                  "shown": all(keyword_in(k, mem_seen) for k in p.expect)},
                       "summarization": {"reply": sum_reply, "hit": all(keyword_in(k, sum_reply) for k in p.expect),
                                         "shown": all(keyword_in(k, sum_seen) for k in p.expect)}})
        clock.advance(step)
    memory_rows = mem_calls.summary()
    memory_rows.update({r: v for r, v in engine.ledger.summary().items() if r != "chat"})
    return {
        "scenario": scenario.name,
        "model": label,
        "trigger": list(trigger),
        "keep_messages": cfg.keep_recent,
        "memory": memory_rows,
        "summarization": sum_calls.summary(),
        "probes": probes,
    }


def format_table(result: dict[str, Any]) -> str:
    roles = ["chat", "summary", *MEMORY_ROLES]
    head = f"{'role':<13}| {'memory: calls':>13} {'in':>8} {'out':>7} | {'summarization: calls':>20} {'in':>8} {'out':>7}"
    lines = [f"scenario {result['scenario']} · model {result['model']} · summarization trigger "
             f"{tuple(result['trigger'])}, keep {result['keep_messages']} messages", head, "-" * len(head)]
    totals = {"memory": [0, 0, 0], "summarization": [0, 0, 0]}

    def cells(side: str, role: str, width: int) -> str:
        row = result[side].get(role)
        if row is None:
            return f"{'-':>{width}} {'-':>8} {'-':>7}"
        vals = [int(row["calls"]), int(row["input_tokens"]), int(row["output_tokens"])]
        totals[side] = [a + b for a, b in zip(totals[side], vals, strict=True)]
        return f"{vals[0]:>{width}} {vals[1]:>8} {vals[2]:>7}"

    for role in roles:
        if role in result["memory"] or role in result["summarization"]:
            lines.append(f"{role:<13}| {cells('memory', role, 13)} | {cells('summarization', role, 20)}")
    lines.append("-" * len(head))
    m, s = totals["memory"], totals["summarization"]
    lines.append(f"{'total':<13}| {m[0]:>13} {m[1]:>8} {m[2]:>7} | {s[0]:>20} {s[1]:>8} {s[2]:>7}")
    n = len(result["probes"])
    hits = {side: sum(p[side]["hit"] for p in result["probes"]) for side in ("memory", "summarization")}
    shown = {side: sum(p[side]["shown"] for p in result["probes"]) for side in ("memory", "summarization")}
    lines.append(f"{'probes hit':<13}| {hits['memory']:>11}/{n} {'':>16} | {hits['summarization']:>18}/{n}")
    lines.append(f"{'fact shown':<13}| {shown['memory']:>11}/{n} {'':>16} | {shown['summarization']:>18}/{n}")
    if result["model"] == "scripted":
        lines.append("note: the scripted model answers only from what it is shown and does not write summaries "
                     "(it acknowledges), so offline the summarization column's recall is a floor; its call and "
                     "token counts are real.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=None, help=f"scenario YAML (default {DEFAULT_SCENARIO.name})")
    ap.add_argument("--base-url", default=None, help="an OpenAI-compatible server for every model call")
    ap.add_argument("--model", default="deepseek-chat", help="model name at --base-url")
    ap.add_argument("--json", type=Path, default=None, help="write the full result as JSON here")
    args = ap.parse_args(argv)
    if args.scenario is not None:
        scenario = load_scenario(args.scenario)
    elif DEFAULT_SCENARIO.exists():
        scenario = load_scenario(DEFAULT_SCENARIO)
    else:
        scenario = parse_scenario(INLINE, source="inline")
    result = run(scenario, base_url=args.base_url, model=args.model)
    print(format_table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
