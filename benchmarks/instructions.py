"""Instructions per retrieval, or per ordinary session turn, counted by callgrind.

This machine's clock drifts up to 2x within minutes, so a 1-3 % change cannot be seen in wall
time; valgrind's instruction counts repeat to ~0.1 % (benchmarks/README). The store is built
first without valgrind (under `--work`, reused while it exists); then the measurement runs under
`valgrind --tool=callgrind --instr-atstart=no`, and the script switches counting on and off
around what it measures by running `callgrind_control` on itself:

- `retrieval`: `MemoryEngine.retrieve(..., log=True)` as `bench perf` runs it (the same corpus,
  config and questions), `--queries` of them after 10 warm-up questions;
- `session`: the ordinary turns of `bench perf`'s side-by-side rounds after a `--turns`-turn
  session: the long session's next turn and a new user's first turns, alternately, each group
  counted in its own valgrind process. Event turns are not counted: a replay without valgrind
  first says which turns fire one (replays are deterministic), and the counted run checks it.

Compare two checkouts by running the same command from each (same `--work`: a script whose
paths differ moves the counts by up to ~0.7 %). Needs valgrind (`apt-get install valgrind`).

    python benchmarks/instructions.py retrieval [--size 10000] [--record-vectors hash] [--queries 30] [--json OUT]
    python benchmarks/instructions.py session [--turns 2000] [--rounds 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.core.clock import VirtualClock  # noqa: E402
from engine.eval.perf.corpus import BENCH_NOW, STORE_FACTORIES, synthetic_corpus  # noqa: E402
from engine.eval.perf.retrieval import SESSION, USER, bench_config, checkpoint, fill_store  # noqa: E402
from engine.eval.perf.session import STEP_SECONDS, UserTalk  # noqa: E402
from engine.eval.runinfo import git_commit, machine, write_json  # noqa: E402
from engine.memory.engine import MemoryEngine  # noqa: E402
from engine.roles.embeddings import HashEmbeddings  # noqa: E402
from engine.stores.sqlite import SQLiteStore  # noqa: E402

DIM = 384
WARM_QUESTIONS = 10
WARM_ROUNDS = 20  # side-by-side rounds played before counting starts


def _counting(on: bool) -> None:
    """Switch callgrind's counting for this process (a no-op outside valgrind)."""
    if os.environ.get("MEMLAB_CALLGRIND") == "1":
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                       check=True, capture_output=True)


# -- retrieval --------------------------------------------------------------------------------------

def _retrieval_store(work: Path, size: int, record_vectors: str) -> Path:
    path = work / f"retrieval-{size}-{record_vectors}"
    if not (path / "bench.db").exists():
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        store = STORE_FACTORIES["sqlite"](str(path), DIM)
        try:
            fill_store(store, synthetic_corpus(dim=DIM, seed=7), size, 3, None, "build", record_vectors)
            checkpoint(store)
        finally:
            store.close()
    return path


def _retrievals(store_dir: str, queries: int) -> int:
    """The counted part of a retrieval run; returns how many were counted."""
    corpus = synthetic_corpus(dim=DIM, seed=11)
    texts = [corpus.sentence(3, 6) for _ in range(queries + WARM_QUESTIONS)]
    with tempfile.TemporaryDirectory(prefix="memlab-instructions-") as tmpdir:
        copy = os.path.join(tmpdir, "store")  # the retrievals log: every run starts from the same store
        shutil.copytree(store_dir, copy)
        store = STORE_FACTORIES["sqlite"](copy, DIM)
        try:
            engine = MemoryEngine(bench_config(), store=store, clock=VirtualClock(BENCH_NOW),
                                  embedder=HashEmbeddings(DIM))
            for text in texts[:WARM_QUESTIONS]:
                engine.retrieve(USER, text, session_id=SESSION, log=True)
            _counting(True)
            for text in texts[WARM_QUESTIONS:]:
                engine.retrieve(USER, text, session_id=SESSION, log=True)
            _counting(False)
        finally:
            store.close()
    return queries


# -- session ----------------------------------------------------------------------------------------

def _session_db(work: Path, turns: int) -> Path:
    """The database after a `turns`-turn session (as `bench perf` plays it), and beside it the clock."""
    path = work / f"session-{turns}.db"
    if not path.exists():
        tmp = path.with_suffix(".building")
        for old in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            old.unlink(missing_ok=True)
        clock, talk, steps = VirtualClock(BENCH_NOW), UserTalk(0), random.Random(1)
        store = SQLiteStore(str(tmp), dim=DIM, embedder_name="hash")
        try:
            engine = MemoryEngine(None, store=store, clock=clock, embedder=HashEmbeddings(DIM))
            for _ in range(turns):
                engine.turn("session-user", "long-session", talk())
                clock.advance(timedelta(seconds=steps.uniform(*STEP_SECONDS)))
            checkpoint(store)
        finally:
            store.close()
        Path(f"{path}.now").write_text(clock.now().isoformat())
        tmp.rename(path)
    return path


def _rounds(db: Path, rounds: int, group: str, plan: dict[str, list[int]] | None) -> tuple[int, dict[str, list[int]]]:
    """Play WARM_ROUNDS + `rounds` rounds (long session, then a new user) on a copy of `db`; count the
    ordinary turns of `group` the plan says fire no event. Returns (turns counted, event turns by group)."""
    with tempfile.TemporaryDirectory(prefix="memlab-instructions-") as tmpdir:
        work = Path(tmpdir) / "session.db"
        shutil.copy(db, work)
        store = SQLiteStore(str(work), dim=DIM, embedder_name="hash")
        try:
            clock = VirtualClock(datetime.fromisoformat(Path(f"{db}.now").read_text().strip()))
            engine = MemoryEngine(None, store=store, clock=clock, embedder=HashEmbeddings(DIM))
            talk, fresh, steps = UserTalk(5), UserTalk(7), random.Random(3)
            fired: dict[str, list[int]] = {"long": [], "new": []}
            counted = 0
            for i in range(WARM_ROUNDS + rounds):
                for g in ("long", "new"):
                    user, session = ("session-user", "long-session") if g == "long" else (f"new-user-{i // 10}", "s")
                    text = talk() if g == "long" else fresh()
                    count = plan is not None and g == group and i >= WARM_ROUNDS and i not in plan[g]
                    if count:
                        _counting(True)
                    result = engine.turn(user, session, text)
                    if count:
                        _counting(False)
                    counted += count
                    if result.event_fired:
                        fired[g].append(i)
                    clock.advance(timedelta(seconds=steps.uniform(*STEP_SECONDS)))
        finally:
            store.close()
    if plan is not None and fired != plan:
        raise SystemExit("the counted run fired events on other turns than its plan: not a replay")
    return counted, fired


# -- driver -----------------------------------------------------------------------------------------

def _under_callgrind(args: list[str], out: Path) -> int:
    """Run this script with `args` under callgrind (counting off until it switches it on); its total."""
    for old in out.parent.glob(out.name + "*"):
        old.unlink()
    env = {**os.environ, "MEMLAB_CALLGRIND": "1", "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           sys.executable, __file__, *args, "--child"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"valgrind run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    total = 0
    for part in out.parent.glob(out.name + "*"):  # "totals:" counts what was collected ("summary:" may say 0)
        total += sum(int(line.split()[1]) for line in part.read_text(errors="replace").splitlines()
                     if line.startswith("totals:"))
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("retrieval", "session"))
    ap.add_argument("--size", type=int, default=10000, help="retrieval: the user's records")
    ap.add_argument("--record-vectors", choices=("synthetic", "hash"), default="hash")
    ap.add_argument("--queries", type=int, default=30, help="retrieval: questions counted")
    ap.add_argument("--turns", type=int, default=2000, help="session: the long session's length")
    ap.add_argument("--rounds", type=int, default=40, help="session: side-by-side rounds counted")
    ap.add_argument("--group", choices=("long", "new"), help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--work", default="build/instructions", help="where the stores are built and kept")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if a.child:  # under valgrind: only the counted part
        if a.mode == "retrieval":
            _retrievals(str(_retrieval_store(work, a.size, a.record_vectors)), a.queries)
        else:
            _rounds(_session_db(work, a.turns), a.rounds, a.group, json.loads(Path(a.plan).read_text()))
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    result: dict = {"mode": a.mode, "commit": git_commit(), "machine": machine()}
    if a.mode == "retrieval":
        _retrieval_store(work, a.size, a.record_vectors)
        total = _under_callgrind(["retrieval", "--size", str(a.size), "--record-vectors", a.record_vectors,
                                  "--queries", str(a.queries), "--work", str(work)], work / "retrieval.out")
        result.update(size=a.size, record_vectors=a.record_vectors, queries=a.queries,
                      instructions_per_retrieval=total / a.queries)
        print(f"retrieval, {a.size} records ({a.record_vectors} vectors), {a.queries} questions: "
              f"{total / a.queries / 1e6:.3f} M instructions each")
    else:
        db = _session_db(work, a.turns)
        _, plan = _rounds(db, a.rounds, "long", None)
        plan_path = work / "session-plan.json"
        plan_path.write_text(json.dumps(plan))
        groups = ("long", "new")
        with ThreadPoolExecutor(len(groups)) as pool:  # the counts do not depend on the machine's load
            totals = list(pool.map(lambda g: _under_callgrind(
                ["session", "--turns", str(a.turns), "--rounds", str(a.rounds), "--group", g, "--plan", str(plan_path),
                 "--work", str(work)], work / f"session-{g}.out"), groups))
        per = {}
        for group, total in zip(groups, totals, strict=True):
            counted = a.rounds - sum(1 for i in plan[group] if i >= WARM_ROUNDS)
            per[group] = {"turns": counted, "instructions_per_turn": total / counted}
        ratio = per["long"]["instructions_per_turn"] / per["new"]["instructions_per_turn"]
        result.update(turns=a.turns, rounds=a.rounds, groups=per, long_over_new=ratio)
        print(f"ordinary turns after a {a.turns}-turn session: long session {per['long']['instructions_per_turn'] / 1e6:.2f} M "
              f"instructions ({per['long']['turns']} turns), a new user {per['new']['instructions_per_turn'] / 1e6:.2f} M "
              f"({per['new']['turns']} turns): x{ratio:.2f}")
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if a.json_out:
        write_json(a.json_out, result)
        print(f"wrote {a.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
