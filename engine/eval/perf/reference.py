"""`memlab bench perf --against reference`: memlab and the reference package side by side, in one run.

The reference (`memory-middleware`, PyPI) is never a dependency of memlab: it is installed into
its own virtualenv under `build/reference-venv` on first use, and its side runs there as a
subprocess worker (engine/eval/perf/reference_worker.py, JSON lines over stdin/stdout). For each
size N:

1. the same data for both: the synthetic corpus (engine.eval.perf.corpus) for the measured user
   and `other_users` others holding `other_fraction * N` records each (1.0 by default: 4 users x
   N records, the layout issue 14 measured), added in batches to memlab's SQLite store and written
   to a data file (texts, ages, types, reinforcement counts, and the very same float32 vectors)
   from which the worker builds the reference's store through its public `FragmentsMemoryRAG.add`;
2. the queries interleave: for each query text, memlab's `MemoryEngine.retrieve(user, text,
   session_id=..., log=True)` timed in-process (as engine.eval.perf.retrieval does) and the
   reference's per-event retrieval timed inside the worker (its own perf_counter, not the IPC),
   the order alternating query by query; the query vector is memlab's hash embedding of the text
   for both;
3. each side's share of the user's own records reached: the records its ranking formula scores
   per query (the only ones it can return), counted per query: the reference scores the user's
   rows among the vec0 KNN's `retrieve_k` (default 4096) nearest rows of the whole table (all
   users), from its scoring log; memlab scores each path's top-k plus the floor candidates
   (`Retrieval.rows`), and its BM25 and dense paths search the user's whole partition.
Medians and p95 per side, the ratio reference / memlab, and the shares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.eval.perf.corpus import BENCH_NOW, DIM, STORE_FACTORIES, synthetic_corpus
from engine.eval.perf.retrieval import (
    BATCH,
    SESSION,
    USER,
    WARMUP,
    check_record_vectors,
    checkpoint,
    percentile_ms,
    stored_vectors,
)
from engine.eval.perf.stages import format_stages, stage_medians
from engine.eval.runinfo import format_probe
from engine.roles.embeddings import HashEmbeddings

__all__ = [
    "REFERENCE_SPEC",
    "WORKER_SCRIPT",
    "ReferenceUnavailable",
    "ReferenceWorker",
    "ensure_reference_python",
    "format_reference_table",
    "reference_venv",
    "run_against_reference",
]

REFERENCE_SPEC = "memory-middleware==0.3.0"
REFERENCE_DIST = "memory-middleware"
REFERENCE_MODULE = "memory_middleware"
#: Installed beside the reference: SQLite with extension loading, for Python builds whose sqlite3 has it off.
SQLITE_SHIM = "sqlean.py"
WORKER_SCRIPT = Path(__file__).with_name("reference_worker.py")


class ReferenceUnavailable(ConfigError):
    """The reference's environment could not be created or its package not imported."""


def reference_venv(root: str | os.PathLike | None = None) -> Path:
    """build/reference-venv under the repository root (git-ignored)."""
    base = Path(root) if root is not None else Path(__file__).resolve().parents[3]
    return base / "build" / "reference-venv"


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _installed_version(python: Path, dist: str) -> str | None:
    try:
        out = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                             capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def ensure_reference_python(spec: str = REFERENCE_SPEC, *, venv: Path | None = None,
                            progress: Callable[[str], None] | None = None) -> Path:
    """The interpreter of build/reference-venv with `spec` installed, creating it on first use.

    Raises ReferenceUnavailable, saying why, when the venv cannot be made or pip cannot install
    (no network, no such version).
    """
    venv = venv or reference_venv()
    python = _venv_python(venv)
    dist, _, want = spec.partition("==")
    if python.exists():
        have = _installed_version(python, dist)
        if have is not None and (not want or have == want) and _installed_version(python, SQLITE_SHIM) is not None:
            return python
    say = progress or (lambda m: None)
    if not python.exists():
        say(f"creating {venv} for the reference ({spec})")
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
        if made.returncode != 0 or not python.exists():
            raise ReferenceUnavailable(f"could not create the reference's virtualenv {venv}: "
                                       f"{(made.stderr or made.stdout).strip()[-500:]}")
    say(f"installing {spec} (and {SQLITE_SHIM}) into {venv}")
    pip = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", spec, SQLITE_SHIM],
                         capture_output=True, text=True, timeout=1800, check=False)
    if pip.returncode != 0 or _installed_version(python, dist) is None:
        tail = "\n".join(line for line in (pip.stderr or pip.stdout).splitlines()
                         if not line.startswith("WARNING: Location"))[-800:]
        raise ReferenceUnavailable(f"could not install {spec} into {venv} (no network? pip exit {pip.returncode}):\n"
                                   f"{tail}")
    return python


class ReferenceWorker:
    """The worker subprocess: one JSON request per line in, one answer per line out."""

    def __init__(self, python: str | os.PathLike, *, module: str = REFERENCE_MODULE,
                 pythonpath: Sequence[str] = (), script: Path = WORKER_SCRIPT):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # memlab's own path must not leak into the reference's interpreter
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen([str(python), str(script), "--module", module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None, text=True, env=env, bufsize=1)
        first = self._read()
        if not first.get("ok"):
            self.close()
            raise ReferenceUnavailable(f"the reference worker did not start: {first.get('error')}")

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            code = self.proc.poll()
            raise ReferenceUnavailable(f"the reference worker exited (code {code}) without answering")
        return json.loads(line)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if not answer.get("ok"):
            raise RuntimeError(f"reference worker {op}: {answer.get('error')}\n{answer.get('trace', '')}")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("close")
            except Exception:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for fh in (self.proc.stdin, self.proc.stdout):
            if fh:
                fh.close()

    def __enter__(self) -> ReferenceWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fill_both(store: Any, corpus: synthetic_corpus, n: int, other_users: int, other_fraction: float,
               meta_path: str, vec_path: str, progress, label: str,
               record_vectors: str = "synthetic") -> tuple[int, float]:
    """The same records and vectors into memlab's store and the worker's data files; (rows, memlab seconds)."""
    embedder = HashEmbeddings(corpus.dim)
    per_other = int(round(n * other_fraction))
    users = [(USER, n)] + [(f"other-{i}", per_other) for i in range(other_users)]
    rid, t_ingest = 0, 0.0
    with open(meta_path, "w", encoding="utf-8") as meta, open(vec_path, "wb") as vec:
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            for uid, total in users:
                cnt = (total * (start + m)) // n - (total * start) // n
                if cnt <= 0:
                    continue
                recs = corpus.records(uid, cnt, BENCH_NOW)
                vecs = stored_vectors(corpus, recs, record_vectors, embedder)
                t0 = time.perf_counter()
                store.add_records(recs, vecs)
                t_ingest += time.perf_counter() - t0
                for r in recs:
                    rid += 1
                    seen = r.last_reinforced_at or r.created_at
                    meta.write(json.dumps({
                        "user": uid, "id": rid, "text": r.content, "age_s": (BENCH_NOW - seen).total_seconds(),
                        "type": [r.memory_type], "theme": r.tags[0] if r.tags else "",
                        "strengthen_num": r.strengthen_count}, ensure_ascii=False) + "\n")
                vec.write(np.ascontiguousarray(vecs, dtype="<f4").tobytes())
            if progress:
                progress(f"{label}: {start + m}/{n} records of the user (and the others')")
    return rid, t_ingest


def _measure_size(worker: ReferenceWorker, n: int, *, config: Any, dim: int, queries: int, other_users: int,
                  other_fraction: float, seed: int, progress, ref_knn_k: int = 4096,
                  record_vectors: str = "synthetic") -> dict[str, Any]:
    from engine.memory.engine import MemoryEngine

    corpus = synthetic_corpus(dim=dim, seed=seed)
    with tempfile.TemporaryDirectory(prefix="memlab-bench-ref-") as tmpdir:
        store = STORE_FACTORIES["sqlite"](tmpdir, dim)
        try:
            meta_path, vec_path = os.path.join(tmpdir, "records.jsonl"), os.path.join(tmpdir, "vectors.f32")
            rows, t_memlab = _fill_both(store, corpus, n, other_users, other_fraction, meta_path, vec_path,
                                        progress, f"N={n}", record_vectors)
            if progress:
                progress(f"N={n}: building the reference's store ({rows} records)")
            built = worker.request("build", meta=meta_path, vectors=vec_path, dim=dim,
                                   db=os.path.join(tmpdir, "reference.db"), batch=BATCH)
            for p in (meta_path, vec_path):
                os.remove(p)
            checkpoint(store)  # after the bulk load, as `bench perf` does
            user_records = store.count_records(USER)
            embedder = HashEmbeddings(dim)
            engine = MemoryEngine(config, store=store, clock=VirtualClock(BENCH_NOW), embedder=embedder)
            texts = [corpus.sentence(3, 6) for _ in range(queries + WARMUP)]
            vectors = [list(map(float, embedder.embed_query(t))) for t in texts]

            mem_scored: list[int] = []
            mem_stages: list[dict[str, float]] = []

            def memlab_once(text: str) -> float:
                t0 = time.perf_counter()
                got = engine.retrieve(USER, text, session_id=SESSION, log=True)
                seconds = time.perf_counter() - t0
                mem_scored.append(len(got.rows))  # every candidate the ranking scored (the user's, all)
                mem_stages.append(got.stages)
                return seconds

            def reference_once(i: int) -> dict[str, Any]:
                return worker.request("retrieve", user=USER, text=texts[i], vector=vectors[i])

            for i in range(WARMUP):  # warm both sides' caches
                memlab_once(texts[i])
                reference_once(i)
            mem_scored.clear()
            mem_stages.clear()
            mem_lat, ref_lat, ref_cands = [], [], []
            for j, i in enumerate(range(WARMUP, WARMUP + queries)):
                if j % 2 == 0:
                    mem_lat.append(memlab_once(texts[i]))
                    ans = reference_once(i)
                else:
                    ans = reference_once(i)
                    mem_lat.append(memlab_once(texts[i]))
                ref_lat.append(float(ans["seconds"]))
                ref_cands.append(int(ans["candidates"]))
                if progress and (j + 1) % max(1, queries // 5) == 0:
                    progress(f"N={n}: {j + 1}/{queries} interleaved queries")
        finally:
            store.close()
    knn_k = int(built.get("retrieve_k") or ref_knn_k)
    knn_rows = min(knn_k, rows)
    mem = {"p50_ms": percentile_ms(mem_lat, 50), "p95_ms": percentile_ms(mem_lat, 95),
           "scored_records": int(np.median(mem_scored)), "scored_share": round(float(np.median(mem_scored)) / n, 4),
           "searched_records": int(user_records), "searched_share": round(user_records / n, 4),
           "ingest_per_s": round(rows / t_memlab, 1) if t_memlab else None,
           "stages_p50_ms": stage_medians(mem_stages)}
    ref = {"p50_ms": percentile_ms(ref_lat, 50), "p95_ms": percentile_ms(ref_lat, 95),
           "scored_records": int(np.median(ref_cands)), "scored_share": round(float(np.median(ref_cands)) / n, 4),
           "scored_share_min": round(min(ref_cands) / n, 4), "scored_share_max": round(max(ref_cands) / n, 4),
           "knn_k": knn_k, "knn_rows": knn_rows, "knn_rows_of_user": round(float(np.median(ref_cands)) / max(1, knn_rows), 4),
           "ingest_per_s": round(built["records"] / built["ingest_seconds"], 1) if built["ingest_seconds"] else None}
    ratio = [r / m for r, m in zip(ref_lat, mem_lat, strict=True) if m > 0]
    return {
        "records_user": n, "records_total": rows, "queries": queries, "memlab": mem, "reference": ref,
        "ratio_p50": round(ref["p50_ms"] / mem["p50_ms"], 4) if mem["p50_ms"] else None,
        "ratio_p95": round(ref["p95_ms"] / mem["p95_ms"], 4) if mem["p95_ms"] else None,
        "ratio_median_per_query": round(float(np.median(ratio)), 4) if ratio else None,
    }


def run_against_reference(
    *,
    sizes: Sequence[int] = (1000, 10000, 100000),
    queries: int = 50,
    other_users: int = 3,
    other_fraction: float = 1.0,
    seed: int = 0,
    k: int | None = None,
    dim: int = DIM,
    python: str | os.PathLike | None = None,
    spec: str = REFERENCE_SPEC,
    module: str = REFERENCE_MODULE,
    pythonpath: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    at: Any = None,
    record_vectors: str = "synthetic",
) -> dict[str, Any]:
    """Both sides at every size; `python` = an interpreter that already has the reference (else the
    build/ venv is made or reused). `module`/`pythonpath` let a test put a fake reference in place.
    `record_vectors`: the stored vectors, the same for both (engine.eval.perf.retrieval.RECORD_VECTORS)."""
    from engine.eval.perf.retrieval import bench_config
    from engine.eval.runinfo import (
        git_commit,
        machine,
        package_versions,
        probe_machine,
        sqlite_versions,
    )

    check_record_vectors(record_vectors)
    if python is None:
        python = ensure_reference_python(spec, progress=progress)
    cfg = bench_config(k)
    probe = {"before": probe_machine()}
    with ReferenceWorker(python, module=module, pythonpath=pythonpath) as worker:
        hello = worker.request("hello")
        per_size = {}
        for n in sizes:
            per_size[str(int(n))] = _measure_size(worker, int(n), config=cfg, dim=dim, queries=queries,
                                                  other_users=other_users, other_fraction=other_fraction,
                                                  seed=seed, progress=progress, record_vectors=record_vectors)
    config = {
        "measured": "memlab MemoryEngine.retrieve(user, text, session_id=..., log=True) vs the reference's "
                    "per-event retrieval (BalancedMultiDimensionMemory._extract_fragments_by_time), interleaved",
        "sizes": [int(s) for s in sizes], "dim": dim, "queries": queries, "other_users": other_users,
        "other_fraction": other_fraction, "seed": seed, "k": cfg.candidate_k, "preset": cfg.preset,
        "paths": list(cfg.paths), "top_k": cfg.top_k, "embedder": f"memlab hash ({dim}-d), same vectors both sides",
        "record_vectors": record_vectors,
        "reference": {"spec": spec, "module": hello.get("module"), "version": hello.get("version"),
                      "sqlite_driver": hello.get("sqlite_driver"), "python": hello.get("python"),
                      "retrieve_k": "MemoryConfig default (None -> 4096 nearest of the whole table)",
                      "formula_params": "TimeMemoryFormulaParam() defaults, no LLM"},
        **machine(), "versions": {**sqlite_versions(), **package_versions(("numpy", "langchain-core", "memlab"))},
        "git_commit": git_commit(), "run_at": None if at is None else at.isoformat(),
        "machine_probe": {**probe, "after": probe_machine()},  # the machine's speed, not the code's
    }
    return {"config": config, "against": "reference", "sizes": per_size}


def _knn_k(result: dict[str, Any]) -> int:
    refs = [row["reference"] for row in result["sizes"].values()]
    return max((r.get("knn_k") or r.get("knn_rows") or 0) for r in refs) if refs else 0


def format_reference_table(result: dict[str, Any]) -> str:
    cfg, ref = result["config"], result["config"]["reference"]
    lines = [
        f"memlab bench perf --against reference: {ref.get('module')} {ref.get('version')} "
        f"(python {ref.get('python')}, {ref.get('sqlite_driver')}) vs memlab (git {str(cfg.get('git_commit'))[:12]})",
        f"{cfg['queries']} interleaved queries per size, {1 + cfg['other_users']} users "
        f"({cfg['other_users']} others x {cfg['other_fraction']:g} N), {cfg['embedder']}, "
        f"record vectors {cfg.get('record_vectors', 'synthetic')}, "
        f"{cfg.get('cores')} cores; ms per retrieval, each side timed in its own process",
        *([probe] if (probe := format_probe(cfg.get("machine_probe"))) else []),
        f"{'N':>8}{'ref p50':>9}{'ref p95':>9}{'memlab p50':>11}{'memlab p95':>11}{'ratio p50':>10}"
        f"{'ref scored':>11}{'memlab scored':>14}{'memlab searched':>16}",
    ]
    for n, row in result["sizes"].items():
        r, m = row["reference"], row["memlab"]
        lines.append(f"{n:>8}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{m['p50_ms']:>11.2f}{m['p95_ms']:>11.2f}"
                     f"{row['ratio_p50']:>9.1f}x{r['scored_share']:>11.2%}{m['scored_share']:>14.2%}"
                     f"{m['searched_share']:>16.0%}")
    for n, row in result["sizes"].items():
        if row["memlab"].get("stages_p50_ms"):
            lines.append(f"  memlab N={n}, stages p50 ms (interleaved): {format_stages(row['memlab']['stages_p50_ms'])}")
    lines += [
        "scored = share of the user's own records the ranking formula scores per query (median), the only ones a "
        "retrieval can return: the reference's are the user's rows among the vec0 KNN's "
        f"{_knn_k(result)} nearest rows of all users' records; "
        "memlab's are each path's top-k plus the floors, taken inside the user's partition",
        "memlab searched = share of the user's records its BM25 and dense paths rank (the user's partition)",
    ]
    return "\n".join(lines)
