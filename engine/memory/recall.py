"""Step 4, retrieval as a turn runs it: parse → three paths → fusion → forgetting-curve ranking.

One function (`retrieve`) is what the turn, the lab, the benchmarks and library users call. Floor
candidates (records carrying an `always_inject_types` tag) are the newest `candidate_k` current
records per such tag, like any other path's top-k; the live-window guard marks candidates the
user just contradicted; the scoring log keeps every candidate's breakdown when asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from engine.core.config import MemoryConfig
from engine.core.laps import Laps
from engine.core.records import MemoryRecord, Message, ScoreRow
from engine.memory.candidates import CandidateSet, record_tokens
from engine.memory.context import EngineContext
from engine.memory.contradiction import LiveRecords, held_back
from engine.memory.expansion import with_message_candidates
from engine.memory.messagepath import message_scores
from engine.memory.querywide import unnamed_vector
from engine.memory.ranking import rank
from engine.memory.results import Retrieval
from engine.memory.retrieval import PathResults, candidate_set, fuse, gather, has_constraint, newest_tagged
from engine.memory.weights import weights_for
from engine.memory.window import pending_messages
from engine.roles.types import ParsedQuery, QueryInput
from engine.stores.base import Store

__all__ = ["logged_rows", "retrieve", "rescore", "parse_query", "parser_note", "assistant_replies"]


def parser_note(parser: object) -> dict[str, str]:
    """Who parsed the question, for a rules-first parser (`FallbackQueryParser`): "rules", or the
    model and why the rules could not resolve it. Empty for a parser without a fallback."""
    if not hasattr(parser, "last_fallback"):
        return {}
    why = getattr(parser, "last_fallback", None)
    return {"parser": "rules"} if why is None else {"parser": "model", "parser_reason": str(why)}


def parse_query(ctx: EngineContext, text: str, *, speaker: str | None, now: datetime) -> ParsedQuery:
    out = ctx.call_role("query_parser", ctx.models.query_parser.parse, QueryInput(text=text, now=now, speaker=speaker))
    return ParsedQuery.model_validate(out, from_attributes=True)


def retrieve(ctx: EngineContext, live: LiveRecords, user_id: str, query: str, *, session_id: str | None,
             config: MemoryConfig, now: datetime, speaker: str | None = None, log: bool = False,
             event_no: int | None = None, pending: Sequence[Message] | None = None) -> Retrieval:
    """Tri-path retrieval and forgetting-curve ranking inside the user's partition. `pending`:
    the session's pending messages when the caller (a turn) has read them already."""
    cfg, store, laps = config, ctx.store, Laps()
    parsed = parse_query(ctx, query, speaker=speaker, now=now)
    laps.lap("parse")
    qvec = ctx.embedder.embed_query(parsed.text) if ("dense" in cfg.paths or "message" in cfg.paths) else None
    if qvec is not None and cfg.unnamed_query > 0:
        qvec = unnamed_vector(ctx.embedder, parsed.text, qvec, cfg.unnamed_query)
    laps.lap("embed")
    # a floor seat needs relevance R >= min_relevance, and a record no path found has R = 0 unless
    # the dimension path credits it: floor records join as the dimension path's pool (kept when it
    # credits them), or as candidates outright when seats need no relevance; safety records hold
    # their seat without relevance and are always candidates
    floor_matters = cfg.min_relevance <= 0 or ("dim" in cfg.paths and has_constraint(parsed))
    floor_tags = list(dict.fromkeys(cfg.always_inject_types if floor_matters else ()))
    tagged = newest_tagged(store, user_id, [*floor_tags, *(["safety"] if cfg.safety_seats else [])],
                           k=cfg.candidate_k)
    floor = {r.id: r for tag in floor_tags for r in tagged[tag]}
    safety = {r.id: r for r in tagged.get("safety", ())}
    # records pinned by hand hold a seat the same way (engine.memory.editing)
    safety.update({r.id: r for r in store.records(user_id, tags_any=["pinned"], limit=cfg.candidate_k,
                                                  newest_first=True)})
    outright = sorted({**safety, **floor}) if cfg.min_relevance <= 0 else sorted(safety)
    laps.lap("floors")
    results = gather(store, user_id=user_id, query=parsed, query_vector=qvec, config=cfg, extra_ids=outright,
                     known={**floor, **safety}, dim_pool=sorted(floor), paths=cfg.paths, laps=laps)
    if cfg.message_candidates > 0 and qvec is not None:
        results = with_message_candidates(store, user_id, results, qvec, embedder=ctx.embedder, config=cfg)
        laps.lap("message")
    if "message" in cfg.paths and cfg.path_weights.get("message", 0) > 0:
        results = replace(results, message=message_scores(store, user_id, results.records, qvec,
                                                          embedder=ctx.embedder,
                                                          neighbours={-1: cfg.message_prev_weight,
                                                                      1: cfg.message_next_weight}))
        laps.lap("message")
    R = fuse(results, path_weights=cfg.path_weights, mode=cfg.fusion)
    counter = ctx.counter
    cands = candidate_set(results, R, now=now, count_tokens=lambda r: record_tokens(counter, r))
    if cfg.diversity > 0:  # diverse seating compares the candidates' embeddings (one read, opt-in)
        cands = cands.with_vectors(store.vectors(user_id, cands.ids))
    theme = _dominant_theme(results, cands)
    weights = weights_for(store, user_id, theme, default=cfg.weights, tuned=cfg.tune_weights)
    laps.lap("candidates")
    excluded: dict[int, str] = {}
    if session_id and not cfg.include_history:
        excluded = held_back(ctx, live, user_id, session_id, results.records,
                             pending_messages(store, user_id, session_id) if pending is None else pending,
                             now=now, event_no=event_no)
    laps.lap("held_back")
    ranking = rank(cands, config=cfg, weights=weights, excluded=excluded, aggregate=parsed.aggregate)
    picked = ranking.picked_ids
    replies = assistant_replies(store, user_id, [results.records[i] for i in picked]) if parsed.needs_assistant else {}
    laps.lap("rank")
    event_id = None
    if log:
        logged = ranking.logged_columns(cfg.score_log_rows, excluded)  # one log entry, no row objects
        with store.transaction():  # the retrieval's event and its score rows: one commit
            ev = ctx.log(user_id, session_id or "", "retrieve", {
                "query": parsed.model_dump(mode="json"),
                "theme": theme,
                "weights": weights.to_dict(),
                "candidates": len(cands),
                "paths": {p: len(getattr(results, p))
                          for p in ("bm25", "dense", "dim", *(("message",) if results.message else ()))},
                "picked": picked,
                "rows_logged": len(logged),
                "assistant_recall": bool(parsed.needs_assistant),
                **parser_note(ctx.models.query_parser),
            }, event_no=event_no)
            store.append_scores(ev.id, user_id, logged)
        event_id = ev.id
        laps.lap("log")
    return Retrieval(query=parsed, ranking=ranking, records=results.records, picked=picked, weights=weights, at=now,
                     event_id=event_id, assistant_replies=replies, excluded=excluded, stages=laps.ms)


def logged_rows(rows: Sequence[ScoreRow], limit: int, excluded: Mapping[int, str] | None = None) -> list[ScoreRow]:
    """The scoring rows a retrieval stores: every row that was seated or held back, and the best
    `limit` by S (rows come best first); `limit` 0 keeps them all. The rest live in the returned
    `Retrieval` only (bounded logs: ~24 rows, not ~200, per turn)."""
    if limit <= 0 or len(rows) <= limit:
        return list(rows)
    held = excluded or {}
    return [r for i, r in enumerate(rows) if i < limit or r.verdict == "picked" or r.record_id in held]


def rescore(retrieval: Retrieval, config: MemoryConfig, weights=None) -> Retrieval:
    """What-if: re-rank the same candidates under another config, touching nothing stored."""
    w = weights or config.weights
    ranking = rank(retrieval.ranking.cands, config=config, weights=w, excluded=retrieval.excluded,
                   aggregate=retrieval.query.aggregate)
    return Retrieval(query=retrieval.query, ranking=ranking, records=retrieval.records, picked=ranking.picked_ids,
                     weights=w, at=retrieval.at, event_id=None,
                     assistant_replies=retrieval.assistant_replies, excluded=retrieval.excluded)


def assistant_replies(store: Store, user_id: str, records: Sequence[MemoryRecord]) -> dict[int, str]:
    """Dynamic assistant recall: the assistant reply that followed each record's source."""
    out: dict[int, str] = {}
    for r in records:
        if r.source is None or not r.source.message_ids:
            continue
        after = max(r.source.message_ids)
        for m in store.messages(user_id, session_id=r.source.session_id, after_id=after, limit=4):
            if m.role == "assistant":
                out[r.id] = m.content
                break
    return out


def _dominant_theme(results: PathResults, cands: CandidateSet) -> str | None:
    """The theme of the best of the three most relevant candidates (R, ties by id) that has one."""
    if not len(cands):
        return None
    for j in np.lexsort((np.asarray(cands.ids), -cands.R))[:3].tolist():
        theme = results.records[cands.ids[j]].theme
        if theme:
            return theme
    return None
