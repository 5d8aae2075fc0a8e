"""Each retrieval path on a tiny corpus with known answers; fusion; update blocking; windows."""

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord, SourcePointer, TimeSpan
from engine.memory.engine import MemoryEngine
from engine.memory.retrieval import PathResults, fuse, record_text
from engine.roles.bundle import Models
from engine.roles.embeddings import HashEmbeddings
from engine.roles.types import ExtractionOutput

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def day(y, m, d):
    start = datetime(y, m, d, tzinfo=UTC)
    return TimeSpan(start=start, end=start + timedelta(days=1) - timedelta(microseconds=1), granularity="day",
                    text=f"{y:04d}-{m:02d}-{d:02d}")


CORPUS = [
    dict(content="Erin went hiking at Mount Snowdon with her brother.", memory_type="episodic", tags=("episode",),
         time=day(2026, 3, 7), location="Mount Snowdon", keywords=("hiking", "snowdon")),
    dict(content="Erin tried a ramen place called Kanada-Ya.", memory_type="episodic", tags=("episode",),
         time=day(2026, 3, 8), keywords=("ramen", "kanada-ya")),
    dict(content="Erin's favourite tea is genmaicha.", memory_type="profile", tags=("preference",),
         keywords=("tea", "genmaicha")),
    dict(content="Erin visited her grandmother in Leeds.", memory_type="episodic", tags=("episode",),
         time=day(2026, 2, 23), location="Leeds", keywords=("grandmother", "leeds")),
]


@pytest.fixture
def engine():
    e = MemoryEngine(MemoryConfig.from_preset("customer service", always_inject_types=(), top_k=1,
                                              decay_enabled=False, tune_weights=False),
                     clock=VirtualClock(T0), embedder=HashEmbeddings(384))
    recs = [MemoryRecord(user_id="erin", created_at=T0 - timedelta(days=1),
                         source=SourcePointer(session_id="s", message_ids=(i + 1,)), **kw)
            for i, kw in enumerate(CORPUS)]
    e.store.add_records(recs, e.embedder.embed_documents([record_text(r) for r in recs]))
    e.store.add_records([MemoryRecord(user_id="other", content="Erin's genmaicha tea ramen hiking", created_at=T0)],
                        [e.embedder.embed_query("Erin's genmaicha tea ramen hiking")])
    return e


def top(engine, query, paths):
    r = engine.retrieve("erin", query, config=engine.config.with_overrides(paths=tuple(paths)))
    return r.records[r.picked[0]].content if r.picked else None, r


def test_bm25_path_finds_the_exact_word(engine):
    content, r = top(engine, "genmaicha", ("bm25",))
    assert "genmaicha" in content
    assert all(rec.user_id == "erin" for rec in r.records.values())


def test_bm25_prefix_knob_reaches_longer_forms(engine):
    exact = engine.retrieve("erin", "grandmothers", config=engine.config.with_overrides(paths=("bm25",)))
    assert exact.picked == []  # "grandmothers" is not a word of the corpus
    opened = engine.retrieve("erin", "grandmothers", config=engine.config.with_overrides(paths=("bm25",), bm25_prefix=4))
    assert "grandmother" in opened.records[opened.picked[0]].content


def test_dense_path_finds_by_vector(engine):
    content, _ = top(engine, "tea genmaicha favourite", ("dense",))
    assert "genmaicha" in content


def test_dimension_path_finds_by_time_alone(engine):
    # no word of the question occurs in the answer: only the time dimension (last weekend) matches
    content, r = top(engine, "What happened last weekend?", ("dim",))
    assert r.query.time is not None
    assert "Snowdon" in content or "Kanada-Ya" in content
    row = r.rows[0]
    assert row.ranks["dim"] == 1 and row.path_scores["dim"] > 0


def test_dimension_path_location(engine):
    content, _ = top(engine, "What did I do in Leeds?", ("dim",))
    assert "Leeds" in content


def test_tri_path_fusion_records_every_path_rank(engine):
    r = engine.retrieve("erin", "Where did I go hiking last weekend?", log=True, session_id="s")
    assert "Snowdon" in r.records[r.picked[0]].content
    stored = engine.store.scores(r.event_id)
    assert len(stored) == len(r.rows) and {"bm25", "dense", "dim"} <= set(stored[0].ranks)


def test_fusion_is_minmax_and_renormalised_over_active_paths():
    res = PathResults(bm25={1: 10.0, 2: 5.0}, dense={1: 0.2, 2: 0.9}, dim={}, records={1: None, 2: None},
                      dim_active=False)
    R = fuse(res, path_weights={"bm25": 0.5, "dense": 0.5, "dim": 0.5}, mode="minmax")
    assert R == {1: pytest.approx(0.5), 2: pytest.approx(0.5)}  # dim inactive: weights renormalised
    R = fuse(res, path_weights={"bm25": 1.0, "dense": 0.0, "dim": 0.0}, mode="minmax")
    assert R[1] == 1.0 and R[2] == 0.0


def test_anchored_fusion_scales_from_no_evidence_to_the_best():
    res = PathResults(bm25={1: 10.0, 2: 5.0}, dense={1: 0.2, 2: 0.9}, dim={}, records={1: None, 2: None},
                      dim_active=False)
    R = fuse(res, path_weights={"bm25": 0.5, "dense": 0.5, "dim": 0.5})  # the default mode
    assert R == {1: pytest.approx((1.0 + 0.2 / 0.9) / 2), 2: pytest.approx((0.5 + 1.0) / 2)}
    nothing = PathResults(bm25={}, dense={1: 0.0, 2: -0.06}, dim={}, records={1: None, 2: None}, dim_active=False)
    assert fuse(nothing, path_weights={"bm25": 0.4, "dense": 0.4, "dim": 0.2}) == {1: 0.0, 2: 0.0}
    assert fuse(nothing, path_weights={"bm25": 0.4, "dense": 0.4, "dim": 0.2}, mode="minmax")[1] == 1.0


class RecordingExtractor:
    def __init__(self, inner):
        self.inner, self.inputs = inner, []

    def extract(self, inp):
        self.inputs.append(inp)
        return self.inner.extract(inp)


def test_overlapping_windows_ground_records_in_the_new_suffix_only():
    models = Models.scripted()
    rec = RecordingExtractor(models.extractor)
    models.extractor = rec
    clock = VirtualClock(T0)
    e = MemoryEngine(MemoryConfig.from_preset("customer service", window=4, overlap=2, tau_m=1, slice_value=0.01,
                                              trigger_threshold=6), clock=clock, models=models)
    for i in range(8):
        e.turn("u", "s", f"Fact number {i}: my locker {i} holds item{i}.")
        clock.advance(60)
    assert len(rec.inputs) >= 2
    for inp in rec.inputs:
        assert len(inp.new) <= 2 and len(inp.context) <= 2
        assert not {m.id for m in inp.new} & {m.id for m in inp.context}
    later = [inp for inp in rec.inputs if inp.context]
    assert later  # a window after the first carries the previous messages as context
    for r in e.store.records("u"):
        grounded = set(r.source.message_ids)
        window = next(inp for inp in rec.inputs if grounded <= {m.id for m in inp.new})
        assert window is not None


class EchoExtractor:
    """Returns a fixed fact so the update step sees near-duplicates."""

    def extract(self, inp):
        from engine.roles.types import ExtractedRecord

        return ExtractionOutput(records=[ExtractedRecord(content="The user's phone number is 138-0000-1111.",
                                                         keywords=["phone", "number"], source_ids=[inp.new[0].id])])


def test_update_blocking_counts_saved_comparisons_and_merges_duplicates():
    models = Models.scripted()
    models.extractor = EchoExtractor()
    clock = VirtualClock(T0)
    e = MemoryEngine(MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01, trigger_threshold=2),
                     clock=clock, models=models)
    e.store.add_records([MemoryRecord(user_id="u", content=f"Unrelated note {i} about gardening.", keywords=("garden",),
                                      created_at=T0) for i in range(10)],
                        [e.embedder.embed_query(f"Unrelated note {i} about gardening.") for i in range(10)])
    for i in range(6):
        e.turn("u", "s", f"message {i}")
        clock.advance(60)
    updates = e.store.events(kind="update")
    assert sum(len(u.payload["merged"]) for u in updates) >= 1  # the same fact again: merged, not duplicated
    assert sum(1 for r in e.store.records("u") if "138-0000-1111" in r.content) == 1
    saved = sum(u.payload["comparisons_saved"] for u in updates)
    done = sum(u.payload["comparisons_done"] for u in updates)
    assert saved > done  # blocking skipped the unrelated records before any cosine


def test_stored_scoring_rows_are_bounded_and_keep_every_seat_and_hold():
    from engine.core.records import ScoreRow
    from engine.memory.recall import logged_rows

    def row(i, verdict="dropped"):
        return ScoreRow(record_id=i, ranks={}, path_scores={}, R=0.0, T=0.0, F=0.0, parts={}, S=1 - i / 100,
                        verdict=verdict, why="")

    rows = [row(i) for i in range(60)] + [row(60, "picked"), row(61)]
    kept = logged_rows(rows, 24, {61: "contradicted by the live window"})
    assert [r.record_id for r in kept] == [*range(24), 60, 61]
    assert logged_rows(rows, 0) == rows and logged_rows(rows[:10], 24) == rows[:10]
