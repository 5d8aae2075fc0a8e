"""memlab's own replay: a `MemoryEngine` played through the one driver, with its event log.

`EngineRunner` is the adapter between the driver and an engine (one `MemoryEngine.turn` per
scenario turn); the engine-backed comparison strategies use it too. `replay` adds what only
memlab has: one summary per memory event (gate numbers, records added / merged / superseded,
tuning, induction, injected tokens), the full event log and the engine's ledger.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import Event
from engine.eval.driver import TurnView, drive, probe_recall
from engine.eval.scenario import Scenario
from engine.memory.engine import MemoryEngine

__all__ = ["EngineRunner", "ReplayResult", "replay", "summarize_events", "result_json"]


class EngineRunner:
    """One `MemoryEngine.turn` per scenario turn; `detail` adds the engine's state to each view
    (record count, injected contents, profile), which the lab's turn scrubber shows."""

    def __init__(self, engine: MemoryEngine, *, detail: bool = False):
        self.engine = engine
        self.detail = detail

    @property
    def ledger(self):
        return self.engine.ledger

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        r = self.engine.turn(user_id, session_id, text, name=name)
        p = r.prompt
        shown = "\n".join([p.system] + [m["content"] for m in p.messages[1:-1]])
        state: dict[str, Any] = {"event_fired": r.event_fired, "event_no": r.event_no,
                                 "window_messages": len(p.messages) - 1}
        if self.detail:
            profile = self.engine.profile(user_id)
            state.update(records=len(self.engine.records(user_id, include_invalid=False)),
                         injected=[rec.content for rec in self.engine.store.get_records(user_id, list(p.record_ids))],
                         profile={k: list(v) for k, v in profile.fields.items()})
        return TurnView(reply=r.reply, shown=shown, prompt=[{"role": m["role"], "content": m["content"]}
                                                            for m in p.messages],
                        payload_tokens=p.payload_tokens, record_ids=tuple(p.record_ids), state=state)


@dataclass
class ReplayResult:
    scenario: str
    config: dict[str, Any]
    probes: list[dict[str, Any]]
    events: list[dict[str, Any]]
    ledger: dict[str, dict[str, float]]
    payload_tokens: int
    event_log: list[dict[str, Any]]
    strategy: str = "memlab"

    def to_dict(self, *, full_log: bool = False) -> dict[str, Any]:
        out = {"scenario": self.scenario, "strategy": self.strategy, "config": self.config, "probes": self.probes,
               "events": self.events, "calls": self.ledger, "payload_tokens": self.payload_tokens}
        if full_log:
            out["event_log"] = self.event_log
        return out

    def recall(self) -> dict[str, int]:
        return probe_recall(self.probes)


def replay(
    scenario: Scenario,
    *,
    config: MemoryConfig | None = None,
    engine_factory: Callable[..., MemoryEngine] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay a scenario through a fresh engine on the driver's clock; check every probe.

    `engine_factory(config=, clock=)` builds the engine (the CLI's adds a store, embedder and
    models); the default is `MemoryEngine` with scripted models in memory.
    """
    cfg = config or scenario.memory_config()
    clock = VirtualClock(scenario.start)
    engine = (engine_factory or MemoryEngine)(config=cfg, clock=clock)
    run = drive(scenario, EngineRunner(engine), clock, progress=progress)
    # only this scenario's users: a shared --db may hold other replays' events
    events = sorted((e for u in scenario.users for e in engine.store.events(user_id=u)), key=lambda e: e.id or 0)
    return ReplayResult(scenario=scenario.name, config=cfg.describe(), probes=run.probes,
                        events=summarize_events(events), ledger=engine.ledger.summary(),
                        payload_tokens=run.payload_tokens, event_log=[e.to_dict() for e in events])


def _event_row(e: Event, gate: dict[str, Any]) -> dict[str, Any]:
    return {"event_no": e.event_no, "user": e.user_id, "session": e.session_id, "at": e.at.isoformat(),
            "turn": e.turn, "gate": {k: gate.get(k) for k in ("pending", "maturity", "trigger_value",
                                                               "oldest_age_seconds")},
            "messages_extracted": 0, "records_added": 0, "merged": 0, "superseded": 0, "tuned": [],
            "inducted": 0, "injected_tokens": 0, "errors": 0, "comparisons_saved": 0}


def _count(row: dict[str, Any], e: Event) -> None:
    p = e.payload
    if e.kind == "extract":
        row["messages_extracted"] += len(p.get("message_ids", []))
    elif e.kind == "update":
        row["records_added"] += len(p.get("added", []))
        row["merged"] += len(p.get("merged", []))
        row["superseded"] += len(p.get("superseded", []))
        row["comparisons_saved"] += int(p.get("comparisons_saved", 0))
    elif e.kind == "tune":
        row["tuned"].append(p.get("theme"))
    elif e.kind == "induct":
        row["inducted"] += len(p.get("record_ids", []))
    elif e.kind == "inject":
        row["injected_tokens"] = int(p.get("payload_tokens", 0))
    elif e.kind == "error":
        row["errors"] += 1


def summarize_events(events: Sequence[Event]) -> list[dict[str, Any]]:
    """One summary per memory event (gate opening): gate numbers, records, updates, injected tokens."""
    by_no: dict[tuple[str, int], dict[str, Any]] = {}
    last_gate: dict[tuple[str, str], dict] = {}
    for e in events:
        if e.kind == "gate":
            last_gate[(e.user_id, e.session_id)] = dict(e.payload)
        if e.event_no is None:
            continue
        key = (e.user_id, e.event_no)
        if key not in by_no:
            by_no[key] = _event_row(e, last_gate.get((e.user_id, e.session_id), {}))
        _count(by_no[key], e)
    return list(by_no.values())


def result_json(result: ReplayResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, indent=2, sort_keys=False)
