"""lab/timeline_data.py without Streamlit: record strength T along the virtual timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from engine.core.forgetting import decay
from engine.core.records import Event, MemoryRecord
from lab import timeline_data as td
from lab.state import new_lab

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
TAU, C = 43200.0, 0.5


def _rec(rid, *, said=T0, created=T0 + H, last=None, invalid=None, n=0, text=None):
    return MemoryRecord(id=rid, user_id="u", content=text or f"record {rid}", created_at=created, said_at=said,
                        last_reinforced_at=last, strengthen_count=n, invalid_at=invalid)


def _ev(kind, at, payload, turn=1):
    return Event(user_id="u", session_id="s1", kind=kind, at=at, payload=payload, turn=turn)


def _T(seconds):
    return decay(seconds, tau=TAU, c=C)


def test_decay_counts_from_said_then_from_each_reinforcement():
    r = _rec(1, last=T0 + 5 * H, n=1)
    hs = td.histories([r], [_ev("reinforce", T0 + 5 * H, {"record_ids": [1], "cause": "used in reply"})])
    h = hs[0]
    assert h.reinforcements == ((T0 + 5 * H, "used in reply"),)
    assert td.strength_at(h, T0 + 3 * H, tau=TAU, c=C) == pytest.approx(_T(3 * 3600))  # from said, not extracted
    assert td.strength_at(h, T0 + 5 * H, tau=TAU, c=C) == 1.0
    assert td.strength_at(h, T0 + 5 * H, tau=TAU, c=C, inclusive=False) == pytest.approx(_T(5 * 3600))
    assert td.strength_at(h, T0 + 7 * H, tau=TAU, c=C) == pytest.approx(_T(2 * 3600))


def test_series_starts_at_extraction_jumps_at_reinforcement_and_ends_when_superseded():
    keep = _rec(1, last=T0 + 5 * H, n=1)
    gone = _rec(2, invalid=T0 + 4 * H)
    hs = td.histories([keep, gone], [])  # last_reinforced_at alone still counts as a reinforcement
    pts = td.series(hs, until=T0 + 10 * H, since=T0, tau=TAU, c=C)
    by = {rid: [p for p in pts if p.record_id == rid] for rid in (1, 2)}
    for line in by.values():
        assert [p.seq for p in line] == list(range(len(line)))
        assert line == sorted(line, key=lambda p: (p.at, p.seq))
        assert line[0].at == T0 + H  # extraction, not the said time
        assert line[0].T == pytest.approx(_T(3600))
    assert by[1][-1].at == T0 + 10 * H and by[2][-1].at == T0 + 4 * H
    at_jump = [p for p in by[1] if p.at == T0 + 5 * H]
    assert [round(p.T, 6) for p in at_jump] == [round(_T(5 * 3600), 6), 1.0]
    after = [p for p in by[1] if p.at > T0 + 5 * H]
    assert all(a.T >= b.T for a, b in pairwise(after))  # decays again
    for p in by[1]:
        anchor = T0 + 5 * H if p.at > T0 + 5 * H else T0
        if p.at != T0 + 5 * H:
            assert p.T == pytest.approx(_T((p.at - anchor).total_seconds()))


def test_restatement_is_dated_when_said_and_ranking_follows_it():
    a, b = _rec(1), _rec(2, last=T0 + 2 * H, n=1)
    ev = _ev("reinforce", T0 + 6 * H, {"record_ids": [2], "cause": "restated", "at": (T0 + 2 * H).isoformat()})
    hs = td.histories([a, b], [ev])
    assert hs[1].reinforcements == ((T0 + 2 * H, "restated"),)
    before = td.ranking_at(hs, T0 + 1.5 * H, tau=TAU, c=C)
    after = td.ranking_at(hs, T0 + 3 * H, tau=TAU, c=C)
    assert [r["record_id"] for r in before] == [1, 2]  # tie on T, id order
    assert [r["record_id"] for r in after] == [2, 1]
    assert after[0]["reinforcements"] == 1 and after[0]["decay counts from"] == T0 + 2 * H
    assert [r["rank"] for r in after] == [1, 2]
    assert td.ranking_at(hs, T0 + 0.5 * H, tau=TAU, c=C) == []  # nothing extracted yet


def test_markers_place_injections_before_the_reinforcement_of_the_same_instant():
    r = _rec(1, last=T0 + 2 * H, n=1)
    hs = td.histories([r], [_ev("reinforce", T0 + 2 * H, {"record_ids": [1], "cause": "used in reply"})])
    inj = [_ev("inject", T0 + 2 * H, {"record_ids": [1, 99]}, turn=4), _ev("inject", T0 + 9 * H, {"record_ids": [1]})]
    ms = td.markers(hs, inj, tau=TAU, c=C, until=T0 + 5 * H)
    kinds = [(m.kind, m.at) for m in ms]
    assert kinds == [("extracted", T0 + H), ("injected", T0 + 2 * H), ("reinforced", T0 + 2 * H)]
    injected = ms[1]
    assert injected.T == pytest.approx(_T(2 * 3600)) and injected.detail == "turn 4"
    assert ms[2].T == 1.0


def test_before_extraction_the_dotted_stretch_ends_where_the_line_starts():
    hs = td.histories([_rec(1, said=T0, created=T0 + 3 * H)], [])
    pts = td.series(hs, until=T0 + 6 * H, tau=TAU, c=C, before_extraction=True)
    pre = [p for p in pts if p.phase == td.PRE_PHASE]
    kept = [p for p in pts if p.phase == td.IN_MEMORY]
    assert pre[0].at == T0 and pre[0].T == 1.0 and pre[-1].at == T0 + 3 * H
    assert kept[0].at == T0 + 3 * H and kept[0].T == pre[-1].T == pytest.approx(_T(3 * 3600))
    assert [p.seq for p in pts] == list(range(len(pts)))
    assert td.series(hs, until=T0 + 6 * H, tau=TAU, c=C)[0].phase == td.IN_MEMORY  # off by default


def test_decay_off_draws_flat_lines():
    hs = td.histories([_rec(1)], [])
    pts = td.series(hs, until=T0 + 30 * H, tau=TAU, c=C, decay_enabled=False)
    assert pts and {p.T for p in pts} == {1.0}


def test_units_follow_the_span():
    assert td.time_unit(3 * 86400) == ("hours", 3600.0)
    assert td.time_unit(10 * 86400) == ("days", 86400.0)
    assert td.elapsed(T0 + 36 * H, T0, 86400.0) == 1.5


def test_the_timeline_agrees_with_the_ranking_the_engine_logged():
    """T recomputed from the records and the log equals T in every logged score row."""
    lab = new_lab()
    for text in ("Hi, I'm Alice and I live in Lisbon.", "I prefer window seats when I fly.",
                 "My sister is called Maria."):
        lab.chat(text)
    lab.fast_forward("1h")
    lab.chat("Where do I live?")
    lab.fast_forward("1d")
    lab.chat("Which seat do I like on a plane?")
    lab.fast_forward("3d")
    lab.chat("Where do I live?")
    store, cfg = lab.engine.store, lab.engine.config
    hs = {h.record_id: h for h in td.histories(store.records("alice", include_invalid=True),
                                              store.events(user_id="alice", kind="reinforce"))}
    assert any(h.reinforcements for h in hs.values())
    checked = 0
    for ev in store.events(user_id="alice", kind="retrieve"):
        for row in store.scores(ev.id):
            # a turn retrieves before the reply reinforces: same instant, not yet counted
            got = td.strength_at(hs[row.record_id], ev.at, tau=cfg.tau, c=cfg.c, inclusive=False)
            assert got == pytest.approx(row.T, abs=1e-5), (row.record_id, ev.at)
            checked += 1
    assert checked >= 8
