"""Running the LongMemEval benchmark, its report, and `memlab bench longmemeval --data FILE`.

Every method runs over every question, each question's haystack indexed alone in a fresh
in-memory store (and, for the engine's path, a fresh engine). The metric is turn-level evidence
recall@k: per question, the fraction of its `has_answer` turns found among the sources of the
top-k retrieved items, averaged per question type and overall. Session recall@k (the fraction of
`answer_session_ids` among the top-k items' sessions) is reported beside it. Abstention questions
(`_abs`) have no evidence: they are counted, not scored.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import ConfigError
from engine.eval.locomo.data import evidence_recall
from engine.eval.locomo.methods import (
    USER,
    CachedEmbedder,
    IngestStats,
    ingest_totals,
    tripath_config,
)
from engine.eval.longmemeval.data import LmeData, LmeQuestion, load_longmemeval
from engine.eval.longmemeval.methods import (
    DEFAULT_METHODS,
    METHODS,
    NOW_RULE,
    index_question,
)
from engine.eval.runinfo import git_commit, machine, package_versions, write_json

__all__ = ["DEFAULT_KS", "LmeMethodResult", "LmeResult", "run_longmemeval", "format_lme_report", "longmemeval_main"]

DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 20)
ALL = "all"


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeMethodResult:
    method: str
    turn_recall: Mapping[str, Mapping[int, float]]  # question type (and "all") → k → mean recall
    session_recall: Mapping[str, Mapping[int, float]]
    questions: Mapping[str, int]  # scored questions per type (and "all")
    items: int  # indexed items over all questions
    seconds: float
    per_question: Sequence[Mapping[str, Any]] = ()
    ingest: Mapping[str, IngestStats] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def table(t: Mapping[str, Mapping[int, float]]) -> dict[str, dict[str, float]]:
            return {name: {str(k): round(v, 4) for k, v in per_k.items()} for name, per_k in t.items()}

        out: dict[str, Any] = {"turn_recall": table(self.turn_recall), "session_recall": table(self.session_recall),
                               "questions": dict(self.questions), "items": self.items,
                               "seconds": round(self.seconds, 2), "per_question": list(self.per_question)}
        if self.ingest:
            out["ingest_total"] = ingest_totals(self.ingest)
        return out


@dataclass(frozen=True, kw_only=True)
class LmeResult:
    config: dict[str, Any]
    methods: dict[str, LmeMethodResult] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "methods": {m: r.to_dict() for m, r in self.methods.items()}}


def _session_recall(q: LmeQuestion, ranked: Sequence[Sequence[str]], k: int) -> float | None:
    """Fraction of the answer sessions among the sessions of the top-k items (None: no answer session)."""
    gold = {f"S{s.position}" for s in q.sessions if s.session_id in set(q.answer_session_ids)}
    if not gold:
        return None
    found = {turn.split(":", 1)[0] for sources in ranked[:k] for turn in sources}
    return len(gold & found) / len(gold)


def _means(values: Mapping[str, Mapping[int, list[float]]], ks: Sequence[int]) -> dict[str, dict[int, float]]:
    out = {name: {k: sum(v[k]) / len(v[k]) for k in ks} for name, v in sorted(values.items()) if v[ks[0]]}
    every = {k: [x for v in values.values() for x in v[k]] for k in ks}
    if every[ks[0]]:
        out[ALL] = {k: sum(every[k]) / len(every[k]) for k in ks}
    return out


def _run_method(method: str, questions: Sequence[LmeQuestion], ks: Sequence[int], emb: CachedEmbedder,
                progress: Callable[[str], None] | None) -> LmeMethodResult:
    t0 = time.perf_counter()
    turn: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    sess: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    items, per_q, ingest = 0, [], {}
    for n, q in enumerate(questions, start=1):
        indexed = index_question(method, q, emb, ks[-1])
        try:
            items += indexed.store.count_records(USER)
            if indexed.ingest is not None:
                ingest[q.question_id] = indexed.ingest
            ranked = indexed.rank()
        finally:
            indexed.store.close()
        recall = {k: evidence_recall(q.evidence, ranked, k) for k in ks}
        for k in ks:
            turn[q.question_type][k].append(recall[k])
            s = _session_recall(q, ranked, k)
            if s is not None:
                sess[q.question_type][k].append(s)
        per_q.append({"question_id": q.question_id, "question_type": q.question_type,
                      "evidence": list(q.evidence), "recall": {str(k): round(v, 4) for k, v in recall.items()},
                      "top": [list(s) for s in ranked[: ks[-1]]]})
        if progress and (n % 25 == 0 or n == len(questions)):
            progress(f"{method}: {n}/{len(questions)} questions ({time.perf_counter() - t0:.1f}s)")
    counts = {name: len(v[ks[0]]) for name, v in sorted(turn.items())}
    counts[ALL] = sum(counts.values())
    return LmeMethodResult(method=method, turn_recall=_means(turn, ks), session_recall=_means(sess, ks),
                           questions=counts, items=items, seconds=time.perf_counter() - t0, per_question=per_q,
                           ingest=ingest)


def run_longmemeval(data: LmeData, *, methods: Sequence[str] = DEFAULT_METHODS, ks: Sequence[int] = DEFAULT_KS,
                    embedder: Any, progress: Callable[[str], None] | None = None) -> LmeResult:
    """Every method over every scored question; turn (and session) recall per type and overall at each k."""
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ConfigError(f"unknown method(s) {bad or methods}; choose from {', '.join(METHODS)}")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ConfigError("--ks needs positive integers, e.g. 1,5,10,20")
    t0 = time.perf_counter()
    emb = embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
    scored = [q for q in data.questions if not q.abstention and q.evidence]
    out = {method: _run_method(method, scored, ks, emb, progress) for method in methods}
    config = _run_config(data, methods=methods, ks=ks, embedder=emb)
    config["wall_seconds"] = round(time.perf_counter() - t0, 1)
    return LmeResult(config=config, methods=out)


def _run_config(data: LmeData, *, methods: Sequence[str], ks: Sequence[int], embedder: Any) -> dict[str, Any]:
    cfg = tripath_config(max(ks))
    return {
        "benchmark": "LongMemEval turn-level evidence recall (fraction of has_answer turns among the top-k "
                     "items' sources); session recall over answer_session_ids beside it",
        "data": data.path,
        "counts": data.counts(),
        "scored": "questions not ending in _abs with at least one has_answer turn",
        "k": list(ks),
        "embedder": embedder.name,
        "methods": list(methods),
        "now_rule": NOW_RULE,
        "isolation": "each question's haystack indexed alone in a fresh in-memory SQLite store (and engine)",
        "turn_text": "turn methods: 'role said, \"content\"'; tripath-scripted: messages keep their role",
        "bm25_turns_vectors": "none: bm25-turns ranks by FTS5 BM25 alone, its turns are not embedded",
        "ingestion": "tripath-scripted: MemoryEngine.ingest per haystack session (clock at the session's end), "
                     "scripted models; retrieval: MemoryEngine.retrieve(user, question, session_id=..., log=True, "
                     "now=question_date)",
        "tripath": {
            "path_weights": dict(cfg.path_weights), "weights": cfg.weights.to_dict(),
            "candidate_k": cfg.candidate_k, "window": cfg.window, "overlap": cfg.overlap,
            "decay_enabled": cfg.decay_enabled, "always_inject_types": list(cfg.always_inject_types),
            "fusion": cfg.fusion,
        },
        "git_commit": git_commit(),
        "machine": machine(),
        "versions": {**package_versions(("memlab", "sentence-transformers", "torch", "sqlite-vec", "dateparser")),
                     "python": sys.version.split()[0], "sqlite (stdlib)": sqlite3.sqlite_version},
    }


def _table(result: LmeResult, ks: Sequence[int]) -> list[str]:
    head = ["method", "question type", "n"] + [f"R@{k}" for k in ks]
    rows = [head]
    for name, r in result.methods.items():
        for qtype in [t for t in r.turn_recall if t != ALL] + [ALL]:
            if qtype in r.turn_recall:
                rows.append([name, qtype, str(r.questions.get(qtype, 0))]
                            + [f"{r.turn_recall[qtype][k]:.3f}" for k in ks])
        if ALL in r.session_recall:
            rows.append([name, "(session recall)", "-"] + [f"{r.session_recall[ALL][k]:.3f}" for k in ks])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for j, row in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def format_lme_report(result: LmeResult) -> str:
    """A plain-text table (method × question type at each k) with the run's configuration."""
    cfg = result.config
    c = cfg["counts"]
    lines = [
        f"LongMemEval turn-level evidence recall — {cfg['data']}",
        f"embedder: {cfg['embedder']}; methods: {', '.join(cfg['methods'])}; k: {cfg['k']}; now: {cfg['now_rule']}",
        (f"questions: {c['questions_read']} read of {c['questions_in_file']} in the file; scored "
         f"{c['questions_scored']}; abstention (_abs, not scored) {c['abstention']}; without has_answer turns "
         f"(not scored) {c['without_evidence_turns']}; {c['sessions']} sessions, {c['turns']} turns"),
        *_table(result, [int(k) for k in cfg["k"]]),
    ]
    for name, r in result.methods.items():
        if r.ingest:
            t = ingest_totals(r.ingest)
            lines.append(f"{name} ingest: {t['sessions']} sessions, {t['messages']} messages → +{t['records_added']}"
                         f" records, merged {t['merged']}, superseded {t['superseded']}, kept both {t['kept_both']},"
                         f" errors {t['errors']}; {t['current_records']} current")
        lines.append(f"{name}: {r.items} items indexed, {r.seconds:.1f} s")
    tp = cfg["tripath"]
    lines.append(f"tripath: path_weights {tp['path_weights']}, score weights {tp['weights']}, candidate_k "
                 f"{tp['candidate_k']}, window {tp['window']}/{tp['overlap']}, decay {tp['decay_enabled']}")
    lines.append(f"wall time {cfg.get('wall_seconds')} s; git {cfg.get('git_commit')}; {cfg.get('versions')}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlab bench longmemeval", description="LongMemEval evidence-recall benchmark")
    p.add_argument("--data", required=True, help="path to a LongMemEval JSON file (e.g. longmemeval_s.json)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions of the file")
    p.add_argument("--ks", default=",".join(str(k) for k in DEFAULT_KS), help="cut-offs, e.g. 1,5,10,20")
    p.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"comma list of: {', '.join(METHODS)}")
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    p.add_argument("--json", dest="json_out", help="write the results and run metadata to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def longmemeval_main(argv: Sequence[str] | None = None) -> int:
    """The `memlab bench longmemeval` command. Returns the process exit code."""
    from engine.roles.embeddings import make_embedder

    args = _parser().parse_args(list(argv or []))
    try:
        ks = [int(x) for x in str(args.ks).split(",") if x.strip()]
    except ValueError:
        print(f"error: --ks {args.ks!r} must be comma-separated integers, e.g. 1,5,10,20", file=sys.stderr)
        return 2
    methods = [m.strip() for m in str(args.methods).split(",") if m.strip()]
    try:
        data = load_longmemeval(args.data, limit=args.limit)
        progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
        result = run_longmemeval(data, methods=methods, ks=ks, embedder=make_embedder(args.embedder),
                                 progress=progress)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_lme_report(result))
    if args.json_out:
        print(f"wrote {write_json(args.json_out, result.to_dict())}")
    return 0
