"""LongMemEval data: the questions of a LongMemEval file, each with its own haystack of sessions.

LongMemEval (xiaowu0162/LongMemEval) is read from a path given on the command line; the project
does not ship it. The published file is a JSON list of question objects; each question carries
its haystack (sessions of `{"role", "content", "has_answer"?}` turns, each session with an id
and a date) and is asked at its `question_date`. Evidence is turn level: the turns marked
`has_answer: true`. Questions whose id ends in `_abs` are abstention questions (the answer is
not in the haystack) and are counted, not scored. A malformed file is refused with every
problem found (up to a cap), each naming the question and the field.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError

__all__ = [
    "QUESTION_TYPES",
    "ROLES",
    "LmeTurn",
    "LmeSession",
    "LmeQuestion",
    "LmeData",
    "parse_lme_date",
    "load_longmemeval",
]

#: The question types of the published files (others are accepted and reported as they come).
QUESTION_TYPES: tuple[str, ...] = ("single-session-user", "single-session-assistant", "single-session-preference",
                                   "multi-session", "temporal-reasoning", "knowledge-update")
ROLES: tuple[str, ...] = ("user", "assistant")
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*$")
_REQUIRED = ("question_id", "question_type", "question", "question_date", "haystack_session_ids", "haystack_dates",
             "haystack_sessions")
_MAX_PROBLEMS = 10


# ------------------------------------------------------------------------------- data model


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeTurn:
    """One turn of a haystack session; `turn_id` is `S<session position>:<turn index>`."""

    turn_id: str
    role: str
    content: str
    at: datetime
    has_answer: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeSession:
    position: int  # 1-based place in the haystack
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
    sessions: tuple[LmeSession, ...]  # in haystack order
    answer_session_ids: tuple[str, ...] = ()

    @property
    def abstention(self) -> bool:
        """An `_abs` question: its answer is not in the haystack (nothing to recall)."""
        return self.question_id.endswith("_abs")

    @property
    def evidence(self) -> tuple[str, ...]:
        """The turn ids marked `has_answer`."""
        return tuple(t.turn_id for s in self.sessions for t in s.turns if t.has_answer)

    @property
    def turns(self) -> tuple[LmeTurn, ...]:
        return tuple(t for s in self.sessions for t in s.turns)


@dataclass(frozen=True, kw_only=True, slots=True)
class LmeData:
    path: str
    questions: tuple[LmeQuestion, ...]
    questions_in_file: int

    def counts(self) -> dict[str, Any]:
        """How many questions were read, scored, abstention, or without evidence turns, by type."""
        scored = [q for q in self.questions if not q.abstention and q.evidence]
        return {
            "questions_in_file": self.questions_in_file,
            "questions_read": len(self.questions),
            "questions_scored": len(scored),
            "abstention": sum(q.abstention for q in self.questions),
            "without_evidence_turns": sum(not q.abstention and not q.evidence for q in self.questions),
            "by_type": dict(sorted(Counter(q.question_type for q in self.questions).items())),
            "sessions": sum(len(q.sessions) for q in self.questions),
            "turns": sum(len(q.turns) for q in self.questions),
        }


# ------------------------------------------------------------------------------- loading


def _date(text: Any) -> datetime | None:
    m = _DATE.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    y, mo, d, h, mi = (int(g) for g in m.groups())
    try:
        return datetime(y, mo, d, h, mi, tzinfo=UTC)
    except ValueError:
        return None


def _bad_date(what: str, text: Any) -> str:
    return f"{what} {text!r} is not a date like '2023/05/30 (Tue) 23:40'; fix the data file"


def parse_lme_date(text: Any, *, what: str = "date") -> datetime:
    """"2023/05/30 (Tue) 23:40" → 2023-05-30 23:40 UTC (the files give no zone: read as UTC)."""
    value = _date(text)
    if value is None:
        raise ConfigError(_bad_date(what, text))
    return value


class _Problems:
    """Collects what is wrong with a file, and stops reading once there are enough to fix."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        self.items.append(text)

    @property
    def full(self) -> bool:
        return len(self.items) >= _MAX_PROBLEMS


def _turns(raw: Any, where: str, position: int, at: datetime, problems: _Problems) -> tuple[LmeTurn, ...]:
    if not isinstance(raw, list):
        problems.add(f"{where}: a session must be a list of turns, got {type(raw).__name__}")
        return ()
    turns: list[LmeTurn] = []
    for i, t in enumerate(raw):
        here = f"{where} turn {i}"
        if not isinstance(t, Mapping):
            problems.add(f"{here}: a turn must be an object {{'role', 'content'}}, got {type(t).__name__}")
            continue
        role, content = t.get("role"), t.get("content")
        if role not in ROLES:
            problems.add(f"{here}: 'role' must be 'user' or 'assistant', got {role!r}")
            continue
        if not isinstance(content, str):
            problems.add(f"{here}: 'content' must be a string, got {type(content).__name__}")
            continue
        # one second apart keeps the order inside a session; the day is what matters
        turns.append(LmeTurn(turn_id=f"S{position}:{i}", role=role, content=content, at=at + timedelta(seconds=i),
                             has_answer=t.get("has_answer") is True))
    return tuple(turns)


def _sessions(q: Mapping[str, Any], where: str, problems: _Problems) -> tuple[LmeSession, ...]:
    ids, dates, sessions = q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]
    for name, value in (("haystack_session_ids", ids), ("haystack_dates", dates), ("haystack_sessions", sessions)):
        if not isinstance(value, list):
            problems.add(f"{where}: '{name}' must be a list, got {type(value).__name__}")
            return ()
    if not len(ids) == len(dates) == len(sessions):
        problems.add(f"{where}: haystack_session_ids ({len(ids)}), haystack_dates ({len(dates)}) and "
                     f"haystack_sessions ({len(sessions)}) must have the same length")
        return ()
    out: list[LmeSession] = []
    for n, (sid, date, raw) in enumerate(zip(ids, dates, sessions, strict=True), start=1):
        here = f"{where} session {n - 1} ({sid!r})"
        at = _date(date)
        if at is None:
            problems.add(_bad_date(f"{here} date", date))
            continue
        out.append(LmeSession(position=n, session_id=str(sid), at=at, turns=_turns(raw, here, n, at, problems)))
    return tuple(out)


def _question(q: Any, i: int, problems: _Problems) -> LmeQuestion | None:
    where = f"question {i}"
    if not isinstance(q, Mapping):
        problems.add(f"{where}: expected an object, got {type(q).__name__}")
        return None
    where = f"question {i} ({q.get('question_id', '?')})"
    missing = [k for k in _REQUIRED if k not in q]
    if missing:
        problems.add(f"{where}: missing field(s) {', '.join(missing)}; is this a LongMemEval file?")
        return None
    if not isinstance(q["question"], str) or not q["question"].strip():
        problems.add(f"{where}: 'question' must be a non-empty string")
        return None
    asked_at = _date(q["question_date"])
    if asked_at is None:
        problems.add(_bad_date(f"{where} question_date", q["question_date"]))
        return None
    sessions = _sessions(q, where, problems)
    answer_ids = q.get("answer_session_ids") or []
    return LmeQuestion(question_id=str(q["question_id"]), question_type=str(q["question_type"]),
                       question=q["question"], answer=str(q.get("answer", "")), asked_at=asked_at,
                       sessions=sessions,
                       answer_session_ids=tuple(str(s) for s in answer_ids) if isinstance(answer_ids, list) else ())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}; pass a LongMemEval file with --data "
                          "(e.g. longmemeval_s.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); pass longmemeval_s.json or a subset of it") from None


def load_longmemeval(path: str | Path, *, limit: int | None = None) -> LmeData:
    """Read a LongMemEval JSON file (a list of question objects); refuse a malformed one.

    `limit` keeps the first N questions (the rest are not read, so a malformed tail is not seen).
    Every problem found is reported at once (up to ten), each naming the question and the field.
    """
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of LongMemEval question objects at the top level, got "
                          f"{type(raw).__name__}")
    if limit is not None:
        if int(limit) < 1:
            raise ConfigError(f"--limit {limit} must be a positive number of questions")
        raw_read: Sequence[Any] = raw[: int(limit)]
    else:
        raw_read = raw
    problems = _Problems()
    questions: list[LmeQuestion] = []
    for i, q in enumerate(raw_read):
        parsed = _question(q, i, problems)
        if parsed is not None:
            questions.append(parsed)
        if problems.full:
            break
    if problems.items:
        raise ConfigError(problems.items, source=str(path))
    if not questions:
        raise ConfigError(f"{path}: no questions; pass longmemeval_s.json or a subset of it")
    return LmeData(path=str(path), questions=tuple(questions), questions_in_file=len(raw))
