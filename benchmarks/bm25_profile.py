"""Where a common word's keyword-path time goes: FTS5 bm25() against reading its postings.

Builds a contentless unicode61 FTS5 table like `records_fts` (one user's keyed terms, random
20k-word vocabulary, 8-30 words a row, one common word in `--matches` rows) in a temporary file
and times, median of `--repeat`: FTS5's bm25 top-116 (the top-first query of k 50), counting the
matches, reading their doc ids, and engine.stores.sqlite.bm25.score_terms without and with a
cache of document lengths. Run: python -m benchmarks.bm25_profile --rows 300000 --matches 73000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from engine.stores.sqlite import bm25
from engine.stores.sqlite.driver import require_driver

KEY = "abcdefghij"


def _build(conn, rows: int, matches: int, seed: int) -> None:
    rng = random.Random(seed)
    vocab = [f"{KEY}w{i}" for i in range(20000)]
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body, content='', contentless_delete=1, tokenize='unicode61')")
    batch = []
    for rid in range(1, rows + 1):
        toks = rng.choices(vocab, k=rng.randint(8, 30))
        if rng.random() < matches / rows:
            toks.append(KEY + "common")
        batch.append((rid, " ".join(toks)))
    conn.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", batch)
    conn.commit()
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, f, instance)")


def _ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300000)
    ap.add_argument("--matches", type=int, default=73000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conn = require_driver().connect(os.path.join(tmp, "fts.db"))
        _build(conn, args.rows, args.matches, seed=1)
        term = KEY + "common"
        cache = bm25.doc_lengths(conn, "SELECT id, sz FROM f_docsize")
        cases = {
            "fts5 bm25 top-116": lambda: conn.execute(
                "SELECT rowid, bm25(f) s FROM f WHERE f MATCH ? ORDER BY s, rowid LIMIT 116", (f'"{term}"',)).fetchall(),
            "count(*) of the MATCH": lambda: conn.execute("SELECT count(*) FROM f WHERE f MATCH ?", (f'"{term}"',)).fetchone(),
            "doc ids of the MATCH (rows to Python)": lambda: conn.execute(
                "SELECT rowid FROM f WHERE f MATCH ?", (f'"{term}"',)).fetchall(),
            "score_terms, lengths by join": lambda: bm25.score_terms(conn, [term], vocab="temp.v", table="f"),
            "score_terms, cached lengths": lambda: bm25.score_terms(conn, [term], vocab="temp.v", table="f",
                                                                    lengths=cache),
        }
        for name, fn in cases.items():
            print(f"{name:40s} {_ms(fn, args.repeat):8.2f} ms")
        conn.close()


if __name__ == "__main__":
    main()
