"""A long real conversation as one session: whole turns, windows of the session, what grows.

LoCoMo's conversations (a `locomo_dev5.json`-shaped file, given on the command line) are played
utterance by utterance as the user messages of ONE session of one user, through
`MemoryEngine.turn` with scripted models and hash embeddings, a turn every 30-60 s of virtual
time (seeded). The bench's own session (`memlab bench perf`) talks from a dozen templates, so
its profile stays tiny; a real conversation's does not, and this run is where the profile's cost
showed (ARCHITECTURE: "The profile is shown within a budget").

Per window of turns it prints the ordinary turns' p50, the turn's and the retrieval's stage
medians; at the end the memory (records, profile values), the last prompt's token counts by part,
the last extractor call's logged input, and the database by table.

    python benchmarks/long_conversation.py --data PATH/locomo_dev5.json [--turns N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.core.clock import VirtualClock  # noqa: E402
from engine.eval.perf.corpus import BENCH_NOW  # noqa: E402
from engine.eval.perf.retrieval import bench_config  # noqa: E402
from engine.eval.perf.stages import stage_medians  # noqa: E402
from engine.eval.runinfo import git_commit, machine, probe_machine  # noqa: E402
from engine.memory.engine import MemoryEngine  # noqa: E402
from engine.roles.embeddings import HashEmbeddings  # noqa: E402
from engine.stores.sqlite import SQLiteStore  # noqa: E402

USER, SESSION = "long-user", "one-long-session"
WINDOW = 100
SHOWN = ("embed", "bm25", "dense", "read", "dim", "candidates", "log")
TURN_SHOWN = ("window", "gate", "inject", "chat", "observe")


def utterances(path: str) -> list[str]:
    """Every utterance of every conversation in the file, in order."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out: list[str] = []
    for conv in data:
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            out += [t["text"] for t in c[f"session_{n}"] if t.get("text")]
            n += 1
    return out


def play(texts: list[str], db: str, seed: int = 1) -> tuple[list[tuple[int, float, bool, dict, dict]], SQLiteStore]:
    store = SQLiteStore(db, dim=384, embedder_name="hash")
    clock = VirtualClock(BENCH_NOW)
    engine = MemoryEngine(bench_config(), store=store, clock=clock, embedder=HashEmbeddings(384))
    steps = random.Random(seed)
    rows = []
    for i, text in enumerate(texts, start=1):
        t0 = time.perf_counter()
        r = engine.turn(USER, SESSION, text)
        rows.append((i, time.perf_counter() - t0, r.event_fired, r.retrieval.stages if r.retrieval else {}, r.stages))
        clock.advance(timedelta(seconds=steps.uniform(30, 60)))
    return rows, store


def windows(rows) -> list[dict]:
    """Ordinary turns per window: the first (from turn 11), the last, and evenly between."""
    total = len(rows)
    between = range(WINDOW, max(WINDOW, total - WINDOW), max(WINDOW, total // 6))
    starts = sorted({11, *between, max(11, total - WINDOW + 1)})
    out = []
    for lo in starts:
        hi = min(total, lo + WINDOW - 1)
        w = [r for r in rows if lo <= r[0] <= hi and not r[2]]
        if not w:
            continue
        st, ts = stage_medians([r[3] for r in w]), stage_medians([r[4] for r in w])
        out.append({"turns": [lo, hi], "ordinary": len(w),
                    "p50_ms": round(statistics.median(r[1] for r in w) * 1000, 3),
                    "retrieval_ms": {k: st.get(k) for k in SHOWN}, "turn_ms": {k: ts.get(k) for k in TURN_SHOWN}})
    return out


def at_end(store: SQLiteStore) -> dict:
    conn = store.conn
    profile = store.get_profile(USER)
    inject = conn.execute("SELECT payload FROM events WHERE user_id = ? AND kind = 'inject' ORDER BY id DESC LIMIT 1",
                          (USER,)).fetchone()
    extraction = conn.execute("SELECT length(payload) FROM events WHERE user_id = ? AND kind = 'extraction' "
                              "ORDER BY id DESC LIMIT 1", (USER,)).fetchone()
    tables = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 8").fetchall()
    pages = conn.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").fetchone()[0]
    last = json.loads(inject[0]) if inject else {}
    return {"records_current": store.count_records(USER, include_invalid=False), "records": store.count_records(USER),
            "profile_values": sum(len(v) for v in profile.fields.values()),
            "last_prompt_tokens": last.get("tokens"), "profile_values_left_out": last.get("profile_values_left_out", 0),
            "last_extraction_payload_chars": extraction[0] if extraction else None,
            "db_bytes": pages, "tables_bytes": {name: size for name, size in tables}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a LoCoMo-shaped JSON file (list of {conversation: ...})")
    p.add_argument("--turns", type=int, default=0, help="play only the first N utterances (0: all)")
    p.add_argument("--json", dest="json_out", help="write the figures with the run's metadata")
    args = p.parse_args(argv)
    texts = utterances(args.data)
    texts = texts[: args.turns] if args.turns > 0 else texts
    probe = {"before": probe_machine()}
    with tempfile.TemporaryDirectory(prefix="memlab-long-") as tmp:
        t0 = time.perf_counter()
        rows, store = play(texts, os.path.join(tmp, "long.db"))
        wall = time.perf_counter() - t0
        try:
            result = {"config": {"data": os.path.basename(args.data), "turns": len(texts), "user_sessions": 1,
                                 "models": "scripted", "embedder": "hash (384-d)", "step_seconds": [30, 60],
                                 "preset": "customer service", **machine(), "git_commit": git_commit()},
                      "wall_s": round(wall, 1), "windows": windows(rows), "end": at_end(store)}
        finally:
            store.close()
    result["config"]["machine_probe"] = {**probe, "after": probe_machine()}
    print(f"{len(texts)} turns of one session ({result['config']['data']}), scripted models, "
          f"git {str(result['config']['git_commit'])[:12]}, {result['wall_s']} s")
    for w in result["windows"]:
        r, t = w["retrieval_ms"], w["turn_ms"]
        print(f"turns {w['turns'][0]:>5}-{w['turns'][1]:<5} ordinary {w['ordinary']:>3}  p50 {w['p50_ms']:6.2f} ms | "
              + " ".join(f"{k} {r[k] or 0:.2f}" for k in SHOWN) + " | "
              + " ".join(f"{k} {t[k] or 0:.2f}" for k in TURN_SHOWN))
    end = result["end"]
    print(f"end: {end['records_current']} current records of {end['records']}, profile {end['profile_values']} values "
          f"({end['profile_values_left_out']} left out of the prompt), last prompt tokens {end['last_prompt_tokens']}, "
          f"last extractor input {end['last_extraction_payload_chars']} chars, database {end['db_bytes'] / 1e6:.1f} MB")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
