"""Reading LongMemEval's published JSON (longmemeval_s / _m / _oracle).

The file is a list of questions. Each has `question_id`, `question_type`, `question`, `answer`,
`question_date` ("2023/05/30 (Tue) 23:40"), and its haystack: `haystack_session_ids`,
`haystack_dates` and `haystack_sessions` (lists of the same length; a session is a list of
`{"role": "user"|"assistant", "content": str, "has_answer"?: bool}` turns). Question ids ending in
`_abs` are abstention questions (the answer is not in the haystack). An evidence turn is one with
`has_answer: true`, named `session_id:index`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError

__all__ = ["LmeTurn", "LmeSession", "LmeQuestion", "load_longmemeval", "parse_lme_date"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeTurn:
    turn_id: str  # session_id:index
    role: str
    content: str
    has_answer: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeSession:
    session_id: str
    at: datetime
    turns: tuple[LmeTurn, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    asked_at: datetime
    sessions: tuple[LmeSession, ...]

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    @property
    def evidence(self) -> frozenset[str]:
        return frozenset(t.turn_id for s in self.sessions for t in s.turns if t.has_answer)


def parse_lme_date(text: Any, *, what: str = "date") -> datetime:
    """"2023/05/30 (Tue) 23:40" → 2023-05-30 23:40 UTC (the data gives no zone)."""
    from dateutil import parser as date_parser

    cleaned = re.sub(r"\([A-Za-z]{2,9}\)", " ", str(text or "")).strip()
    try:
        value = date_parser.parse(cleaned)
    except (ValueError, OverflowError):
        raise ConfigError(f"{what} {text!r} is not a date like '2023/05/30 (Tue) 23:40'; fix the data file") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _need(obj: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ConfigError(f"{where}: missing {key!r}; is this a LongMemEval file?")
    value = obj[key]
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key!r} should be a {kind.__name__}, got {type(value).__name__}")
    return value


def _session(raw: Any, sid: str, date: Any, where: str) -> LmeSession:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: session {sid!r} should be a list of turns")
    turns = []
    for i, t in enumerate(raw):
        role = _need(t, "role", str, f"{where} session {sid} turn {i}")
        if role not in ("user", "assistant"):
            raise ConfigError(f"{where} session {sid} turn {i}: role {role!r} is not user or assistant")
        turns.append(LmeTurn(turn_id=f"{sid}:{i}", role=role, content=str(t.get("content") or ""),
                             has_answer=bool(t.get("has_answer", False))))
    return LmeSession(session_id=sid, at=parse_lme_date(date, what=f"{where} session {sid} date"), turns=tuple(turns))


def _question(raw: Any, n: int) -> LmeQuestion:
    where = f"question #{n}"
    qid = str(_need(raw, "question_id", str, where))
    where = f"question {qid}"
    ids = _need(raw, "haystack_session_ids", list, where)
    dates = _need(raw, "haystack_dates", list, where)
    sessions = _need(raw, "haystack_sessions", list, where)
    if not len(ids) == len(dates) == len(sessions):
        raise ConfigError(f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
                          f"({len(ids)}, {len(dates)}, {len(sessions)})")
    return LmeQuestion(
        question_id=qid, question_type=str(_need(raw, "question_type", str, where)),
        question=str(_need(raw, "question", str, where)), answer=str(raw.get("answer", "")),
        asked_at=parse_lme_date(_need(raw, "question_date", str, where), what=f"{where} question_date"),
        sessions=tuple(_session(s, str(i), d, where) for i, d, s in zip(ids, dates, sessions, strict=True)),
    )


def load_longmemeval(path: str | Path, *, limit: int | None = None) -> list[LmeQuestion]:
    """The questions of a LongMemEval file (the first `limit` when given), validated."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such file; download longmemeval_s.json from the LongMemEval release") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: not readable JSON ({exc})") from None
    if not isinstance(raw, list):
        raise ConfigError(f"{p}: a LongMemEval file is a JSON list of questions, got {type(raw).__name__}")
    items = raw[:limit] if limit else raw
    return [_question(q, n) for n, q in enumerate(items)]
