"""The one scenario driver: clock steps, sessions and speakers exactly as the scenario says, and
probe checks that read only what that probe's turn saw and replied."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from engine.core.clock import VirtualClock
from engine.core.errors import ScenarioError
from engine.eval.driver import TurnView, check_probe, drive, probe_recall
from engine.eval.scenario import parse_scenario

SCENARIO = """\
name: schedule
user: alice
start: 2026-03-02T09:00:00+00:00
turn_seconds: 40
turns:
  - user: "one"
  - user: "two"
    advance: 5m
  - advance: 2h
  - session: new
  - user: "three"
  - as: bob
    user: "four"
    name: Bob B.
  - as: bob
    session: new
    user: "five"
probes:
  - ask: "q1"
    expect: ["alpha"]
    reject: ["omega"]
  - ask: "q2"
    as: bob
    advance: 1d
    session: new
    expect: ["alpha", "beta"]
"""


class Recorder:
    """A runner that says back a scripted reply and shows a scripted context."""

    def __init__(self, clock: VirtualClock, replies: dict[str, str] | None = None,
                 shown: dict[str, str] | None = None):
        self.clock = clock
        self.calls: list[tuple[str, str, str, str | None, float]] = []
        self.replies = replies or {}
        self.shown = shown or {}

    def turn(self, user_id, session_id, text, *, name=None):
        self.calls.append((user_id, session_id, text, name, (self.clock.now() - START).total_seconds()))
        return TurnView(reply=self.replies.get(text, "ok"), shown=self.shown.get(text, ""),
                        prompt=[{"role": "user", "content": text}], payload_tokens=len(text),
                        record_ids=(len(self.calls),))


START = parse_scenario(SCENARIO).start


def _run(replies=None, shown=None):
    sc = parse_scenario(SCENARIO)
    clock = VirtualClock(sc.start)
    runner = Recorder(clock, replies, shown)
    return drive(sc, runner, clock), runner, clock


def test_clock_steps_sessions_and_speakers_are_exactly_the_scenarios():
    run, runner, clock = _run()
    h = 3600
    assert runner.calls == [
        ("alice", "alice-s1", "one", None, 0),
        ("alice", "alice-s1", "two", None, 40),  # turn_seconds after "one"
        ("alice", "alice-s2", "three", None, 40 + 300 + 2 * h),  # its own advance, then a pure advance
        ("bob", "bob-s1", "four", "Bob B.", 40 + 300 + 2 * h + 40),  # `as:` with its own session counter
        ("bob", "bob-s2", "five", None, 40 + 300 + 2 * h + 80),
        ("alice", "alice-s2", "q1", None, 40 + 300 + 2 * h + 120),  # probes default to the scenario's user
        ("bob", "bob-s3", "q2", None, 40 + 300 + 2 * h + 160 + 24 * h),  # a probe's advance comes before it
    ]
    assert clock.now() - START == timedelta(seconds=40 + 300 + 2 * h + 200 + 24 * h)  # a step after each probe
    assert [t["session"] for t in run.turns] == [c[1] for c in runner.calls]
    assert [t["kind"] for t in run.turns] == ["turn"] * 5 + ["probe"] * 2
    assert run.turns[0]["at"] == START.isoformat()


def test_the_judge_reads_only_its_probes_reply_and_context():
    # q1's reply holds the keyword; q2's context holds it (an earlier reply), q2's reply does not
    run, _, _ = _run(replies={"q1": "it is alpha", "q2": "no idea"}, shown={"q2": "earlier: it is alpha, omega"})
    first, second = run.probes
    assert first["expect"] == {"alpha": {"context": False, "reply": True}}
    assert first["reject"] == {"omega": {"context": False, "reply": False}}
    assert second["expect"] == {"alpha": {"context": True, "reply": False}, "beta": {"context": False, "reply": False}}
    assert second["user"] == "bob" and second["injected_record_ids"] == [7]
    assert run.payload_tokens == len("q1") + len("q2")  # probes' payload only
    assert run.recall() == {"expected": 3, "context": 1, "reply": 1, "rejected_served": 0}


def test_a_rejected_value_in_context_or_reply_is_served():
    view = TurnView(reply="you live in Paris", shown="Lyon", prompt=[], payload_tokens=0)
    checked = check_probe(["Paris"], ["Lyon", "Berlin"], view)
    assert probe_recall([checked]) == {"expected": 1, "context": 0, "reply": 1, "rejected_served": 1}


def test_the_clock_must_start_at_the_scenarios_start():
    sc = parse_scenario(SCENARIO)
    clock = VirtualClock(sc.start + timedelta(seconds=1))
    with pytest.raises(ScenarioError, match="must start at the scenario's start"):
        drive(sc, Recorder(clock), clock)


def test_progress_counts_every_turn_and_probe():
    sc = parse_scenario(SCENARIO)
    clock = VirtualClock(sc.start)
    seen = []
    drive(sc, Recorder(clock), clock, progress=lambda d, t: seen.append((d, t)))
    total = len(sc.turns) + len(sc.probes)
    assert seen == [(i, total) for i in range(1, total + 1)]


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.tuples(hs.sampled_from(["alice", "bob", "carol"]), hs.booleans(),
                          hs.one_of(hs.none(), hs.integers(0, 10_000))), min_size=1, max_size=12))
def test_any_schedule_moves_time_forward_and_numbers_sessions_per_user(steps):
    lines = ["name: p", "user: alice", "start: 2026-03-02T09:00:00+00:00", "turn_seconds: 30", "turns:"]
    for i, (user, new, advance) in enumerate(steps):
        lines += [f"  - as: {user}", f'    user: "m{i}"'] + (["    session: new"] if new else []) + \
                 ([f"    advance: {advance}s"] if advance is not None else [])
    sc = parse_scenario("\n".join(lines) + "\n")
    clock = VirtualClock(sc.start)
    runner = Recorder(clock)
    drive(sc, runner, clock)
    times = [c[4] for c in runner.calls]
    expected_times = [0.0]
    for _, _, advance in steps[:-1]:
        expected_times.append(expected_times[-1] + (30 if advance is None else advance))
    assert times == expected_times
    for user in {u for u, _, _ in steps}:
        sessions = [c[1] for c in runner.calls if c[0] == user]
        news = [new for u, new, _ in steps if u == user]
        expected = [f"{user}-s{1 + sum(news[:i + 1])}" for i in range(len(news))]
        assert sessions == expected
