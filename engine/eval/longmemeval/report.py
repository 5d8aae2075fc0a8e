"""Running LongMemEval, its report, and `memlab bench longmemeval --data FILE`.

Every question is its own world: a fresh in-memory store, its haystack sessions ingested in date
order through `MemoryEngine.ingest` (the clock at each session's time, the same extraction and
update a conversation runs), then the question asked through `MemoryEngine.retrieve` at its
`question_date`. An item's sources are the turns its record was made from. Beside it, BM25 over the
raw turns. Abstention questions have no evidence turn: they are counted, not scored.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.core.records import MemoryRecord, SourcePointer
from engine.eval.locomo.data import evidence_recall
from engine.eval.locomo.methods import CachedEmbedder, tripath_config
from engine.eval.longmemeval.data import LmeQuestion, load_longmemeval
from engine.eval.options import parse_sets
from engine.eval.runinfo import git_commit, package_versions
from engine.memory.engine import MemoryEngine
from engine.stores.sqlite import SQLiteStore

__all__ = ["METHODS", "run_longmemeval", "format_table", "longmemeval_main"]

METHODS: tuple[str, ...] = ("bm25-turns", "tripath-scripted")
USER = "lme"
Ranked = list[tuple[str, ...]]


def _bm25_turns(q: LmeQuestion, embedder: Any, k: int) -> Ranked:
    store = SQLiteStore(":memory:", dim=embedder.dim, embedder_name=embedder.name)
    try:
        recs = [MemoryRecord(user_id=USER, content=t.content or "(empty)", memory_type="episodic", tags=("chat",),
                             source=SourcePointer(session_id=s.session_id, speaker=t.role, external_ids=(t.turn_id,)),
                             created_at=s.at, valid_from=s.at)
                for s in q.sessions for t in s.turns]
        stored = store.add_records(recs, [[0.0] * embedder.dim for _ in recs])
        sources = {r.id: tuple(r.source.external_ids) for r in stored}
        return [sources[i] for i, _ in store.search_bm25(USER, q.question, k=k)]
    finally:
        store.close()


def _tripath(q: LmeQuestion, embedder: Any, k: int, overrides: dict[str, Any]) -> tuple[Ranked, int]:
    store = SQLiteStore(":memory:", dim=embedder.dim, embedder_name=embedder.name)
    try:
        sessions = sorted(q.sessions, key=lambda s: s.at)
        clock = VirtualClock(sessions[0].at if sessions else q.asked_at)
        engine = MemoryEngine(tripath_config(k, **overrides), store=store, clock=clock, embedder=embedder)
        turn_of: dict[int, str] = {}
        for s in sessions:
            clock.set(max(clock.now(), s.at))
            result = engine.ingest(USER, f"S{s.session_id}", [{"role": t.role, "content": t.content or "(empty)",
                                                               "at": s.at} for t in s.turns])
            turn_of.update((m.id, t.turn_id) for m, t in zip(result.messages, s.turns, strict=True))
        clock.set(max(clock.now(), q.asked_at))
        r = engine.retrieve(USER, q.question, session_id="question", log=True, now=clock.now())
        ranked = []
        for rid in r.picked[:k]:
            src = r.records[rid].source
            ids = src.message_ids if src is not None else ()
            ranked.append(tuple(dict.fromkeys(turn_of[i] for i in ids if i in turn_of)))
        return ranked, store.count_records(USER)
    finally:
        store.close()


def run_longmemeval(questions: Sequence[LmeQuestion], *, methods: Sequence[str] = METHODS,
                    ks: Sequence[int] = (1, 5, 10, 20), embedder: Any,
                    overrides: dict[str, Any] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Recall@k by question type (and overall) for each method; abstentions counted apart."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ConfigError(f"unknown method(s) {bad}; choose from {', '.join(METHODS)}")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ConfigError("--ks needs positive integers, e.g. 1,5,10")
    overrides = dict(overrides or {})
    tripath_config(ks[-1], **overrides)  # a bad --set fails before any work
    emb = embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
    scored = [q for q in questions if not q.abstention and q.evidence]
    out: dict[str, Any] = {}
    for method in methods:
        t0 = time.perf_counter()
        per_type: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        records = 0
        for n, q in enumerate(scored, 1):
            if method == "bm25-turns":
                ranked = _bm25_turns(q, emb, ks[-1])
            else:
                ranked, made = _tripath(q, emb, ks[-1], overrides)
                records += made
            for k in ks:
                per_type[q.question_type][k].append(evidence_recall(q.evidence, ranked, k))
            if progress:
                progress(f"{method}: {n}/{len(scored)} questions")
        allv = {k: [x for v in per_type.values() for x in v[k]] for k in ks}
        out[method] = {
            "overall": {str(k): round(sum(v) / len(v), 4) if v else None for k, v in allv.items()},
            "by_type": {t: {str(k): round(sum(v[k]) / len(v[k]), 4) for k in ks} for t, v in sorted(per_type.items())},
            "questions_by_type": {t: len(v[ks[0]]) for t, v in sorted(per_type.items())},
            "records": records, "seconds": round(time.perf_counter() - t0, 2),
        }
    return {"config": {
        "benchmark": "LongMemEval turn-level evidence recall (fraction of has_answer turns among the top-k items' sources)",
        "questions": len(questions), "scored": len(scored),
        "abstention": sum(1 for q in questions if q.abstention),
        "without_evidence": sum(1 for q in questions if not q.abstention and not q.evidence),
        "k": ks, "methods": list(methods), "embedder": emb.name, "overrides": {k: str(v) for k, v in overrides.items()},
        "ingestion": "tripath-scripted: each haystack session through MemoryEngine.ingest at its date (scripted "
                     "models); MemoryEngine.retrieve at question_date",
        "git_commit": git_commit(), "versions": {**package_versions(("memlab", "sentence-transformers")),
                                                 "python": sys.version.split()[0]},
    }, "methods": out}


def format_table(result: dict[str, Any]) -> str:
    cfg = result["config"]
    ks = cfg["k"]
    types = sorted({t for m in result["methods"].values() for t in m["by_type"]})
    head = ["method", "secs"] + [f"all@{k}" for k in ks] + [f"{t[:14]}@{ks[-1]}" for t in types]
    rows = [head]
    for name, m in result["methods"].items():
        rows.append([name, f"{m['seconds']:.1f}"] + [f"{m['overall'][str(k)]:.3f}" if m["overall"][str(k)] is not None
                                                     else "-" for k in ks]
                    + [f"{m['by_type'][t][str(ks[-1])]:.3f}" if t in m["by_type"] else "-" for t in types])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"LongMemEval evidence recall: {cfg['questions']} questions, {cfg['scored']} scored, "
             f"{cfg['abstention']} abstention, {cfg['without_evidence']} without evidence turns; embedder "
             f"{cfg['embedder']}; set {cfg['overrides'] or 'nothing'}"]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    first = next(iter(result["methods"].values()), None)
    if first:
        lines.append("questions per type: " + ", ".join(f"{t} {n}" for t, n in first["questions_by_type"].items()))
    lines.append(f"git {cfg['git_commit']}")
    return "\n".join(lines)


def longmemeval_main(argv: Sequence[str] | None = None) -> int:
    """`memlab bench longmemeval --data FILE`. Returns the exit code."""
    from engine.roles.embeddings import make_embedder

    p = argparse.ArgumentParser(prog="memlab bench longmemeval", description="LongMemEval evidence recall")
    p.add_argument("--data", required=True, help="longmemeval_s.json (or _m / _oracle) from the LongMemEval release")
    p.add_argument("--ks", default="1,5,10,20")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(list(argv or []))
    try:
        ks = [int(x) for x in args.ks.split(",") if x.strip()]
    except ValueError:
        print(f"error: --ks {args.ks!r} must be comma-separated integers", file=sys.stderr)
        return 2
    try:
        questions = load_longmemeval(args.data, limit=args.limit)
        progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
        result = run_longmemeval(questions, methods=[m.strip() for m in args.methods.split(",") if m.strip()],
                                 ks=ks, embedder=make_embedder(args.embedder), overrides=parse_sets(args.set),
                                 progress=progress)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(result))
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0
