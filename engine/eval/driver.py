"""The one scenario driver: every replay, comparison, sweep and benchmark plays scenarios here.

`drive` owns the conversation: the virtual clock (it alone moves it), one session counter per
user (`<user>-s1`, `session: new` opens the next), `as:` speakers, clock steps (a turn's own
`advance`, else `turn_seconds`; a probe's `advance` before it is asked) and the probes. A memory
design plugs in as a `Runner`, a small adapter with one method, `turn(user, session, text, name=)`
returning a `TurnView`: the reply, the messages sent and what the model saw.

Probe checks, the same for every runner:
- context recall: an expected keyword is in what the model saw for that probe, its own question
  excluded (`TurnView.shown`);
- reply recall: it is in that probe's reply (only that one: an earlier reply that repeated the
  keyword sits in the probe's context, never in its reply);
- rejected served: a rejected value reached the probe's context or its reply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from engine.core.clock import VirtualClock
from engine.core.errors import ScenarioError
from engine.eval.scenario import Scenario, keyword_in

__all__ = ["TurnView", "Runner", "ScenarioRun", "drive", "check_probe", "probe_recall", "session_id"]


@dataclass(frozen=True, kw_only=True)
class TurnView:
    """What one turn of a runner produced: the reply, the exact messages sent, its memory payload."""

    reply: str
    shown: str  # everything the model saw except this turn's own message
    prompt: list[dict[str, str]]
    payload_tokens: int
    record_ids: tuple[int, ...] = ()  # injected memory records, for runners that have them
    state: dict[str, Any] = field(default_factory=dict)


class Runner(Protocol):
    """A memory design under test: one call per scenario turn, in order."""

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView: ...


def session_id(user: str, number: int) -> str:
    """The id of a user's `number`-th session in a scenario (`alice-s1`, `alice-s2`, …)."""
    return f"{user}-s{number}"


def check_probe(expect: Sequence[str], reject: Sequence[str], view: TurnView) -> dict[str, Any]:
    """Each keyword against what the model saw (context) and against this probe's reply."""

    def marks(keywords: Sequence[str]) -> dict[str, dict[str, bool]]:
        return {k: {"context": keyword_in(k, view.shown), "reply": keyword_in(k, view.reply)} for k in keywords}

    return {"expect": marks(expect), "reject": marks(reject)}


def probe_recall(probes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Keyword counts over checked probes: expected, found in context, in reply, rejected served."""
    ctx = rep = total = rej = 0
    for p in probes:
        for v in p["expect"].values():
            total += 1
            ctx += bool(v["context"])
            rep += bool(v["reply"])
        rej += sum(1 for v in p["reject"].values() if v["context"] or v["reply"])
    return {"expected": total, "context": ctx, "reply": rep, "rejected_served": rej}


@dataclass
class ScenarioRun:
    """One scenario played through one runner: checked probes, every turn, the memory payload."""

    scenario: str
    probes: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    payload_tokens: int

    def recall(self) -> dict[str, int]:
        return probe_recall(self.probes)


class _Sessions:
    """One session counter per user; `session: new` moves that user's counter on."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def current(self, user: str) -> str:
        return session_id(user, self.numbers.setdefault(user, 1))

    def new(self, user: str) -> None:
        self.numbers[user] = self.numbers.get(user, 1) + 1


def drive(
    scenario: Scenario,
    runner: Runner,
    clock: VirtualClock,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> ScenarioRun:
    """Play `scenario` through `runner` on `clock` (which must stand at the scenario's start)."""
    if clock.now() != scenario.start:
        raise ScenarioError(f"{scenario.path or scenario.name}: the driver's clock must start at the scenario's "
                            f"start ({scenario.start.isoformat()}), not {clock.now().isoformat()}; "
                            "pass a fresh VirtualClock(scenario.start)")
    sessions = _Sessions()
    step = timedelta(seconds=scenario.turn_seconds)
    total = len(scenario.turns) + len(scenario.probes)
    turns: list[dict[str, Any]] = []

    def play(kind: str, user: str, text: str, name: str | None) -> TurnView:
        session = sessions.current(user)
        at = clock.now()
        view = runner.turn(user, session, text, name=name)
        turns.append({"n": len(turns) + 1, "kind": kind, "at": at.isoformat(), "user": user, "session": session,
                      "text": text, "reply": view.reply, "prompt": view.prompt,
                      "payload_tokens": view.payload_tokens, "state": view.state})
        return view

    for done, t in enumerate(scenario.turns, start=1):
        user = t.speaker or scenario.user
        if t.new_session:
            sessions.new(user)
        if t.text is not None:
            play("turn", user, t.text, t.name)
            clock.advance(t.advance if t.advance is not None else step)
        elif t.advance is not None:
            clock.advance(t.advance)
        if progress:
            progress(done, total)
    probes: list[dict[str, Any]] = []
    for done, p in enumerate(scenario.probes, start=len(scenario.turns) + 1):
        user = p.speaker or scenario.user
        if p.advance is not None:
            clock.advance(p.advance)
        if p.new_session:
            sessions.new(user)
        view = play("probe", user, p.ask, None)
        probes.append({"ask": p.ask, "user": user, **check_probe(p.expect, p.reject, view), "reply": view.reply,
                       "injected_record_ids": list(view.record_ids), "payload_tokens": view.payload_tokens})
        clock.advance(step)
        if progress:
            progress(done, total)
    return ScenarioRun(scenario=scenario.name, probes=probes, turns=turns,
                       payload_tokens=sum(p["payload_tokens"] for p in probes))
