"""`memlab bench perf --against reference`: the worker protocol and the interleaving, offline.

A tiny fake reference package (the same public surface the worker uses: MemoryConfig,
BalancedMultiDimensionMemory with its RAG, spliter theme map, per-event retrieval and scoring
log, TimeMemoryFormulaParam) is written to tmp_path and put on the worker's path; the worker runs
under this interpreter. No network, no timing assertions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from engine.eval.perf import reference as ref
from engine.eval.perf.report import perf_main

FAKE = textwrap.dedent('''
    """A fake reference: a global KNN of `retrieve_k` rows filtered to the user afterwards, like the real one."""
    import math, os

    __version__ = "9.9.9-fake"
    print("the fake reference prints on import")  # must not reach the protocol stream

    def _log(line):
        path = os.environ.get("FAKE_REF_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\\n")

    class TimeMemoryFormulaParam:
        alpha = beta = gamma = 1 / 3

    class MemoryConfig:
        def __init__(self, rag_db_path="x.db", embeddings=None, retrieve_k=5, top_k=2):
            self.rag_db_path, self.embeddings, self.retrieve_k, self.top_k = rag_db_path, embeddings, retrieve_k, top_k

    class _Doc:
        def __init__(self, text, metadata, vec):
            self.page_content, self.metadata, self.vec = text, metadata, vec

    class _Store:
        closed = False
        def close(self):
            self.closed = True
            _log("closed")

    class FragmentsMemoryRAG:
        def __init__(self, embeddings, dim):
            self.embeddings, self.rows, self.vector_store, self.dim = embeddings, [], _Store(), dim
        async def add(self, docs):
            vecs = self.embeddings.embed_documents([d.page_content for d in docs])
            for d, v in zip(docs, vecs):
                assert len(v) == self.dim
                self.rows.append(_Doc(d.page_content, d.metadata, v))
        async def query_context_distance(self, query, k=None, user_id=None):
            q = self.embeddings.embed_query(query)
            cos = [(sum(a * b for a, b in zip(q, r.vec)), r) for r in self.rows]
            cos.sort(key=lambda x: -x[0])
            return [(r, c) for c, r in cos[:k] if r.metadata["user_id"] == user_id]

    class _Spliter:
        def __init__(self):
            self.dialogue_theme_by_user = {}

    class BalancedMultiDimensionMemory:
        def __init__(self, config, summary_llm=None):
            self.config, self._summary_llm = config, summary_llm
            self.memory_fragments_rag = FragmentsMemoryRAG(config.embeddings, config.embeddings.dim)
            self.memory_spliter = _Spliter()
            self._scoring_log = []
        async def _extract_fragments_by_time(self, user_id):
            theme = self.memory_spliter.dialogue_theme_by_user[user_id]
            _log("reference " + theme)
            print("scoring", theme)
            cands = await self.memory_fragments_rag.query_context_distance(theme, k=self.config.retrieve_k,
                                                                           user_id=user_id)
            if not cands:
                return None
            params = await self._summary_llm.ainvoke([])
            scored = sorted(((d, params.alpha * c) for d, c in cands), key=lambda x: -x[1])
            self._scoring_log.append({"candidates": [{"id": d.metadata["id"]} for d, _ in cands]})
            return scored[: self.config.top_k]
''')


@pytest.fixture()
def fake_ref(tmp_path, monkeypatch):
    (tmp_path / "fake_reference.py").write_text(FAKE, encoding="utf-8")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_REF_LOG", str(log))
    return tmp_path, log


def _worker(path):
    return ref.ReferenceWorker(sys.executable, module="fake_reference", pythonpath=[str(path)])


def test_worker_protocol_build_retrieve_close(fake_ref, tmp_path):
    path, log = fake_ref
    dim = 8
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((6, dim)).astype("<f4")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    meta = tmp_path / "m.jsonl"
    meta.write_text("".join(json.dumps({"user": "u" if i < 3 else "v", "id": i + 1, "text": f"t{i}", "age_s": 10.0,
                                        "type": ["fact"], "theme": "x", "strengthen_num": 0}) + "\n"
                            for i in range(6)), encoding="utf-8")
    (tmp_path / "v.f32").write_bytes(vecs.tobytes())
    with _worker(path) as w:
        hello = w.request("hello")
        assert hello["module"] == "fake_reference" and hello["version"] == "9.9.9-fake"
        with pytest.raises(RuntimeError, match="build before retrieve"):
            w.request("retrieve", user="u", text="q", vector=vecs[0].tolist())
        built = w.request("build", meta=str(meta), vectors=str(tmp_path / "v.f32"), dim=dim, db=str(tmp_path / "r.db"),
                          batch=4)  # two batches: 4 + 2
        assert built["records"] == 6 and built["ingest_seconds"] >= 0
        # the query is record 2's own vector: the fake's global top-5 holds it, and every id it scored is u's
        ans = w.request("retrieve", user="u", text="q", vector=vecs[1].tolist())
        assert ans["picked"][0] == 2
        assert 1 <= ans["candidates"] <= 3 and ans["seconds"] >= 0
        with pytest.raises(RuntimeError, match="unknown op"):
            w.request("nonsense")
    assert log.read_text(encoding="utf-8").splitlines()[-1] == "closed"


def test_missing_module_is_reported(tmp_path):
    with pytest.raises(ref.ReferenceUnavailable, match="cannot import no_such_reference_pkg"):
        ref.ReferenceWorker(sys.executable, module="no_such_reference_pkg", pythonpath=[str(tmp_path)])


def test_interleaved_run_same_queries_and_shares(fake_ref, monkeypatch):
    path, log = fake_ref
    from engine.memory.engine import MemoryEngine

    real = MemoryEngine.retrieve

    def logged(self, user_id, query, **kw):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"memlab {query}\n")
        return real(self, user_id, query, **kw)

    monkeypatch.setattr(MemoryEngine, "retrieve", logged)
    n, queries = 20, 4
    result = ref.run_against_reference(sizes=(n,), queries=queries, python=sys.executable, module="fake_reference",
                                       pythonpath=[str(path)])
    calls = [c for c in log.read_text(encoding="utf-8").splitlines() if c != "closed"]
    # warm-up then timed queries: every query reaches both sides back to back, the order alternating
    assert len(calls) == 2 * (ref.WARMUP + queries)
    pairs = [calls[i:i + 2] for i in range(0, len(calls), 2)]
    for a, b in pairs:
        assert a.split(" ", 1)[1] == b.split(" ", 1)[1]
        assert {a.split(" ", 1)[0], b.split(" ", 1)[0]} == {"memlab", "reference"}
    timed = [p[0].split(" ", 1)[0] for p in pairs[ref.WARMUP:]]
    assert timed == ["memlab", "reference"] * (queries // 2)
    row = result["sizes"][str(n)]
    assert row["records_total"] == 4 * n  # the user and three others with N each, on both sides
    assert row["memlab"]["searched_share"] == 1.0  # all 20 of the user's records are in its partition
    assert 0 < row["memlab"]["scored_records"] <= n
    # the fake's KNN takes the 5 nearest of all 80 rows before keeping the user's: at most 5 of 20
    assert 0 <= row["reference"]["scored_records"] <= 5 and row["reference"]["scored_share"] <= 0.25
    assert row["reference"]["knn_k"] == row["reference"]["knn_rows"] == 5
    assert row["ratio_p50"] == pytest.approx(row["reference"]["p50_ms"] / row["memlab"]["p50_ms"], rel=0.01, abs=1e-4)
    assert result["config"]["reference"]["version"] == "9.9.9-fake"
    table = ref.format_reference_table(result)
    assert "ref p50" in table and f"{n:>8}" in table
    # memlab's own stage medians over the interleaved queries, printed under the table
    stages = row["memlab"]["stages_p50_ms"]
    assert {"parse", "bm25", "dense", "read", "dim", "rank", "log"} <= set(stages)
    assert all(ms >= 0 for ms in stages.values())
    assert f"memlab N={n}, stages p50 ms (interleaved): parse" in table
    probe = result["config"]["machine_probe"]  # the machine's speed before and after, as measured
    assert set(probe) == {"before", "after"} and all(ms > 0 for p in probe.values() for ms in p.values())
    assert "machine probe ms (before / after the run): python" in table


def test_unavailable_reference_exits_nonzero_and_says_so(monkeypatch, capsys, tmp_path):
    def no_network(spec, **kw):
        raise ref.ReferenceUnavailable(f"could not install {spec} into build/reference-venv (no network? pip exit 1)")

    monkeypatch.setattr(ref, "ensure_reference_python", no_network)
    code = perf_main(["--against", "reference", "--sizes", "10", "--queries", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "reference is unavailable" in err and "no network" in err


def test_ensure_reports_pip_failure(monkeypatch, tmp_path):
    venv = tmp_path / "venv"
    py = ref._venv_python(venv)
    py.parent.mkdir(parents=True)
    py.write_text("")  # an interpreter path that exists; every subprocess answers "failed"

    def failing(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ERROR: No matching distribution found")

    monkeypatch.setattr(ref.subprocess, "run", failing)
    with pytest.raises(ref.ReferenceUnavailable, match="No matching distribution"):
        ref.ensure_reference_python("memory-middleware==0.3.0", venv=venv)


def test_ensure_reuses_a_complete_venv_without_pip(monkeypatch, tmp_path):
    venv = tmp_path / "venv"
    py = ref._venv_python(venv)
    py.parent.mkdir(parents=True)
    py.write_text("")
    seen = []

    def versions(cmd, **kw):
        seen.append(cmd)
        if "pip" in cmd:
            raise AssertionError("pip must not run when the venv has the reference already")
        return subprocess.CompletedProcess(cmd, 0, stdout="0.3.0\n", stderr="")

    monkeypatch.setattr(ref.subprocess, "run", versions)
    assert ref.ensure_reference_python("memory-middleware==0.3.0", venv=venv) == py
    assert any("memory-middleware" in " ".join(c) for c in seen) and any("sqlean.py" in " ".join(c) for c in seen)


def test_both_sides_can_store_the_records_texts_hash_embedded(fake_ref, monkeypatch):
    """`--record-vectors hash`: memlab's store and the reference's data file get the records' texts
    hash-embedded (the issue's data shape), the same vectors both sides; the run says so."""
    path, _ = fake_ref
    from engine.core.records import record_text
    from engine.roles.embeddings import HashEmbeddings
    from engine.stores.sqlite import SQLiteStore

    stored, written = [], []
    add = SQLiteStore.add_records
    monkeypatch.setattr(SQLiteStore, "add_records",
                        lambda self, recs, vecs: stored.append((list(recs), np.asarray(vecs))) or add(self, recs, vecs))
    real_fill = ref._fill_both

    def fill(store, corpus, n, others, fraction, meta, vec, *rest):
        out = real_fill(store, corpus, n, others, fraction, meta, vec, *rest)
        written.append(np.fromfile(vec, dtype="<f4"))
        return out

    monkeypatch.setattr(ref, "_fill_both", fill)
    result = ref.run_against_reference(sizes=(20,), queries=2, python=sys.executable, module="fake_reference",
                                       pythonpath=[str(path)], dim=16, record_vectors="hash")
    assert result["config"]["record_vectors"] == "hash"
    assert "record vectors hash" in ref.format_reference_table(result)
    emb = HashEmbeddings(16)
    for recs, vecs in stored:
        np.testing.assert_array_equal(vecs, np.asarray(emb.embed_documents([record_text(r) for r in recs]),
                                                       dtype=np.float32))
    np.testing.assert_array_equal(written[0], np.concatenate([v for _, v in stored]).ravel())
    with pytest.raises(ref.ConfigError, match="record vectors"):
        ref.run_against_reference(sizes=(20,), queries=2, python=sys.executable, record_vectors="minilm")
