"""Run metadata that every benchmark result carries: the git commit, the machine and versions."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["format_probe", "git_commit", "machine", "machine_probe", "package_versions", "probe_machine",
           "resident_memory", "sqlite_versions", "write_json"]


def git_commit() -> str | None:
    """The checkout's HEAD commit, or None outside a git checkout."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (res.stdout.strip() or None) if res.returncode == 0 else None


def resident_memory() -> dict[str, float | None]:
    """The process's resident memory now (Linux /proc), MB: all of it (`rss_mb`), and apart the
    anonymous pages (the heap: caches, arrays) and the file-backed ones (mapped vector copies, whose
    pages the kernel may drop and read again, so this part varies with what was touched and with
    the machine's memory pressure)."""
    out: dict[str, float | None] = {"rss_mb": None, "rss_anon_mb": None, "rss_file_mb": None}
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return out
    for key, name in (("VmRSS", "rss_mb"), ("RssAnon", "rss_anon_mb"), ("RssFile", "rss_file_mb")):
        try:
            kb, unit = fields[key].split()
            out[name] = round(int(kb) / 1024, 1) if unit == "kB" else None
        except (KeyError, ValueError):
            pass
    return out


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "machine": platform.machine(), "platform": platform.platform(),
            "python": platform.python_version()}


def machine_probe(repeats: int = 7) -> dict[str, float]:
    """How long this machine takes, right now, for three fixed pieces of work of the kinds a
    retrieval is made of (milliseconds, median of `repeats`): `python`, dict lookups and a sort of
    5k small tuples; `numpy`, a float32 matrix-vector product over 10k x 384 (15 MB, streamed as
    dense search streams its partition); `sqlite`, 1,000 inserts into an in-memory indexed table,
    one commit, and 500 lookups by key. Nothing of memlab's runs in it.

    The machine's speed drifts (up to 2x within an hour here), so a benchmark takes the probe
    before and after its run: a stage that moved with the probe moved with the machine, not with
    the code. The figures are reported as measured, never used to scale a result."""
    import numpy as np

    rng = np.random.default_rng(0)
    mat = rng.standard_normal((10_000, 384), dtype=np.float32)
    vec = rng.standard_normal(384, dtype=np.float32)
    keys = [(i * 7919) % 5_000 for i in range(5_000)]

    def python_work() -> None:
        table = {k: i for i, k in enumerate(keys)}
        sum(table[k] for k in keys[::2])
        sorted((k % 97, str(k)) for k in keys)

    def numpy_work() -> None:
        np.einsum("ij,j->i", mat, vec)

    def sqlite_work() -> None:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE TABLE t (k INTEGER, v TEXT)")
            conn.execute("CREATE INDEX t_k ON t (k)")
            with conn:
                conn.executemany("INSERT INTO t VALUES (?, ?)", ((k, f"value {k}") for k in keys[:1000]))
            for k in keys[:500]:
                conn.execute("SELECT v FROM t WHERE k = ?", (k,)).fetchone()
        finally:
            conn.close()

    return {name: _median_ms(work, repeats) for name, work in
            (("python", python_work), ("numpy", numpy_work), ("sqlite", sqlite_work))}


def probe_machine() -> dict[str, float]:
    """`machine_probe()` run in a child interpreter, so the measured process is left as it was: its
    15 MB matrix, freed, raised glibc's mmap threshold in the benchmark's own process, after which
    every large temporary came from the heap and stayed. A 1M-record run's RSS went 4.4 -> 7.7 GB
    that way. Empty when the child fails (the figure is metadata, never a result)."""
    code = "import json; from engine.eval.runinfo import machine_probe; print(json.dumps(machine_probe()))"
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                             cwd=Path(__file__).resolve().parents[2])
        return json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {}


def _median_ms(work: Callable[[], None], repeats: int) -> float:
    work()  # warm: first-call costs are not the machine's speed
    times = []
    for _ in range(max(1, int(repeats))):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 3)


def format_probe(probe: dict[str, dict[str, float]] | None) -> str | None:
    """"machine probe ms (before / after): python 4.10 / 4.20, ..." for a run's `machine_probe`
    ({"before": ..., "after": ...}); None when the run has none (results written before it)."""
    if not probe or "before" not in probe:
        return None
    before, after = probe["before"], probe.get("after") or {}
    cells = [f"{k} {v:.2f} / {after[k]:.2f}" if k in after else f"{k} {v:.2f}" for k, v in before.items()]
    return "machine probe ms (before / after the run): " + ", ".join(cells)


def package_versions(names: Sequence[str]) -> dict[str, str]:
    """Installed versions of these distributions (missing ones left out)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def sqlite_versions() -> dict[str, Any]:
    """SQLite, sqlite-vec and the driver the SQLite store runs on."""
    out: dict[str, Any] = {}
    try:
        from engine.stores import sqlite as sqlite_store

        store = sqlite_store.SQLiteStore(":memory:", dim=8)
        try:
            out["sqlite"] = store.conn.execute("SELECT sqlite_version()").fetchone()[0]
            out["sqlite_vec"] = store.conn.execute("SELECT vec_version()").fetchone()[0]
            out["sqlite_driver"] = sqlite_store.driver_name()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - metadata only
        out["sqlite_error"] = str(exc)
    return out


def write_json(path: str | Path, doc: Any) -> Path:
    """A benchmark's results and run metadata as indented UTF-8 JSON (parent folders made)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
