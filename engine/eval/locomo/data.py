"""LoCoMo data: the conversations, questions and gold evidence of a LoCoMo file, and the metric.

LoCoMo (snap-research/LoCoMo, CC BY-NC 4.0) is read from a path given on the command line; the
project does not ship it. Malformed evidence ids are repaired or counted, never a crash. The
metric is the benchmark's own: per question, the fraction of its gold evidence turns (dia_ids)
found among the source dia_ids of the top-k retrieved items. Categories 1–4 only (5,
adversarial, has no answer), with the official numbering.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError

__all__ = [
    "CATEGORY_NAMES",
    "Turn",
    "Observation",
    "Question",
    "Conversation",
    "EvidenceStats",
    "LocomoData",
    "parse_session_datetime",
    "split_evidence",
    "load_locomo",
    "evidence_recall",
]

CATEGORY_NAMES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")


# ------------------------------------------------------------------------------- data model


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """One turn of a LoCoMo conversation; a shared photo is folded into the text."""

    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    at: datetime

    @property
    def item_text(self) -> str:
        """The indexed form: MiniLM does better on `Speaker said, "text"` than on the bare text (measured on LoCoMo turns)."""
        return f'{self.speaker} said, "{self.text}"'


@dataclass(frozen=True, kw_only=True, slots=True)
class Observation:
    """One of the dataset's observation facts: a ready stand-in for an extractor's record."""

    fact: str
    speaker: str
    dia_ids: tuple[str, ...]
    session: int
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Question:
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # gold dia_ids that match a turn
    unmatched: tuple[str, ...] = ()  # gold ids (after repair) that match no turn
    raw_evidence: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, ...]
    session_dates: Mapping[int, datetime]
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...]
    questions: tuple[Question, ...]  # categories 1–4 with at least one matched evidence id

    @property
    def now(self) -> datetime:
        """The last session's date."""
        return max(self.session_dates.values())

    @property
    def ends_at(self) -> datetime:
        """When its last turn was said: the time its questions are asked."""
        return max(t.at for t in self.turns)

    def sessions(self) -> list[tuple[int, list[Turn]]]:
        """(session number, its turns) in the order they happened (by date, then number)."""
        by: dict[int, list[Turn]] = defaultdict(list)
        for t in self.turns:
            by[t.session].append(t)
        return [(n, by[n]) for n in sorted(by, key=lambda n: (self.session_dates[n], n))]


@dataclass(frozen=True, kw_only=True, slots=True)
class EvidenceStats:
    """What the loader did with the gold evidence ids (never a crash)."""

    questions_total: int = 0  # categories 1–4
    questions_scored: int = 0
    questions_without_evidence: int = 0
    questions_without_matched_evidence: int = 0
    evidence_ids: int = 0
    repaired_ids: int = 0  # malformed entries split or normalised ("D8:6; D9:17", "D:11:26")
    unmatched_ids: tuple[str, ...] = ()  # "conv-26:D10:19"

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions_total": self.questions_total,
            "questions_scored": self.questions_scored,
            "questions_without_evidence": self.questions_without_evidence,
            "questions_without_matched_evidence": self.questions_without_matched_evidence,
            "evidence_ids": self.evidence_ids,
            "repaired_ids": self.repaired_ids,
            "unmatched_ids": list(self.unmatched_ids),
            "unmatched_count": len(self.unmatched_ids),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class LocomoData:
    path: str
    conversations: tuple[Conversation, ...]
    stats: EvidenceStats  # of the whole file

    def only(self, sample_ids: Sequence[str]) -> LocomoData:
        """The named conversations, in the file's order (e.g. a development or held-out half)."""
        known = {c.sample_id for c in self.conversations}
        unknown = [s for s in sample_ids if s not in known]
        if unknown:
            raise ConfigError(f"conversation(s) {unknown} are not in {self.path}; it holds {sorted(known)}")
        wanted = set(sample_ids)
        return replace(self, conversations=tuple(c for c in self.conversations if c.sample_id in wanted))


# ------------------------------------------------------------------------------- loading


def parse_session_datetime(text: str, *, what: str = "session date") -> datetime:
    """"1:56 pm on 8 May, 2023" → 2023-05-08 13:56 UTC (LoCoMo gives no zone: read as UTC)."""
    from dateutil import parser as date_parser

    cleaned = re.sub(r"\s+on\s+", " ", str(text or "")).strip()
    try:
        value = date_parser.parse(cleaned)
    except (ValueError, OverflowError):
        raise ConfigError(f"{what} {text!r} is not a date like '1:56 pm on 8 May, 2023'; fix the data file") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def split_evidence(raw: Any) -> tuple[list[str], bool]:
    """One gold evidence entry → well-formed dia_ids, and whether it had to be repaired.

    "D8:6; D9:17" holds two ids; "D:11:26" is "D11:26"; "D" holds none.
    """
    text = str(raw).strip()
    parts = [p for p in re.split(r"[;,\s]+", text) if p]
    ids: list[str] = []
    for p in parts:
        m = _DIA_ID.match(p)
        if m:
            ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    repaired = ids != [text]
    return ids, repaired


def _turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        caption = re.sub(r"^(?:a\s+)?photo\s+of\s+", "", caption, flags=re.I)
        text = f"{text} [shares a photo of {caption}]".strip()
    return text


def _turns(conv: Mapping[str, Any], sample_id: str) -> tuple[dict[int, datetime], list[Turn]]:
    """The session dates and the turns, in (session, index) order."""
    dates: dict[int, datetime] = {}
    turns: list[Turn] = []
    for key, value in conv.items():
        m = _SESSION_KEY.match(key)
        if not m or not isinstance(value, list):
            continue
        n = int(m.group(1))
        stamp = conv.get(f"session_{n}_date_time")
        if stamp is None:
            raise ConfigError(f"{sample_id} session_{n} has no session_{n}_date_time; fix the data file")
        at = parse_session_datetime(stamp, what=f"{sample_id} session_{n}_date_time")
        dates[n] = at
        for i, t in enumerate(value):
            dia = str(t.get("dia_id") or f"D{n}:{i + 1}")
            # one second apart keeps the order inside a session; the day is what matters
            turns.append(Turn(dia_id=dia, session=n, index=i, speaker=str(t.get("speaker") or "user"),
                              text=_turn_text(t), at=at + timedelta(seconds=i)))
    if not dates:
        raise ConfigError(f"{sample_id} has no session_N turns; is this a LoCoMo file?")
    turns.sort(key=lambda t: (t.session, t.index))
    return dates, turns


def _observations(sample: Mapping[str, Any], dates: Mapping[int, datetime]) -> list[Observation]:
    """The dataset's observation facts, each with the dia_ids it cites."""
    observations: list[Observation] = []
    obs = sample.get("observation") or {}
    for key, per_speaker in obs.items() if isinstance(obs, Mapping) else ():
        m = re.match(r"^session_(\d+)_observation$", key)
        if not m or not isinstance(per_speaker, Mapping):
            continue
        n = int(m.group(1))
        at = dates.get(n, max(dates.values()))
        for speaker, facts in per_speaker.items():
            for entry in facts or ():
                if not isinstance(entry, (list, tuple)) or not entry:
                    continue
                fact = str(entry[0]).strip()
                raw_ids = entry[1] if len(entry) > 1 else []
                raw_list = raw_ids if isinstance(raw_ids, list) else [raw_ids]
                ids = tuple(dict.fromkeys(i for r in raw_list for i in split_evidence(r)[0]))
                if fact:
                    observations.append(Observation(fact=fact, speaker=str(speaker), dia_ids=ids, session=n, at=at))
    return observations


def _questions(sample: Mapping[str, Any], sample_id: str, known: set[str]) -> tuple[list[Question], dict[str, Any]]:
    """Scorable questions (categories 1–4 with matched evidence) and the evidence counts."""
    counts: dict[str, Any] = defaultdict(int)
    unmatched_all: list[str] = []
    questions: list[Question] = []
    for qa in sample.get("qa") or ():
        try:
            category = int(qa.get("category"))
        except (TypeError, ValueError):
            continue
        if category not in CATEGORY_NAMES:
            continue
        counts["total"] += 1
        raw = qa.get("evidence") or []
        raw = raw if isinstance(raw, list) else [raw]
        if not raw:
            counts["no_evidence"] += 1
            continue
        ids: list[str] = []
        for r in raw:
            split, repaired = split_evidence(r)
            counts["repaired"] += int(repaired)
            counts["ids"] += max(1, len(split))
            if not split:
                unmatched_all.append(f"{sample_id}:{r}")
            ids.extend(split)
        ids = list(dict.fromkeys(ids))
        matched = tuple(i for i in ids if i in known)
        missing = tuple(i for i in ids if i not in known)
        unmatched_all.extend(f"{sample_id}:{i}" for i in missing)
        if not matched:
            counts["no_match"] += 1
            continue
        questions.append(Question(question=str(qa.get("question", "")), answer=str(qa.get("answer", "")),
                                  category=category, evidence=matched, unmatched=missing,
                                  raw_evidence=tuple(str(r) for r in raw)))
    counts["unmatched"] = unmatched_all
    return questions, counts


def _conversation(sample: Mapping[str, Any], where: str) -> tuple[Conversation, dict[str, Any]]:
    conv = sample.get("conversation")
    if not isinstance(conv, Mapping):
        raise ConfigError(f"{where} has no 'conversation' object; is this a LoCoMo file (locomo10.json)?")
    sample_id = str(sample.get("sample_id") or where)
    dates, turns = _turns(conv, sample_id)
    questions, counts = _questions(sample, sample_id, {t.dia_id for t in turns})
    speakers = tuple(str(conv[k]) for k in ("speaker_a", "speaker_b") if conv.get(k))
    out = Conversation(sample_id=sample_id, speakers=speakers, session_dates=dates, turns=tuple(turns),
                       observations=tuple(_observations(sample, dates)), questions=tuple(questions))
    return out, counts


def load_locomo(path: str | Path, *, limit: int | None = None) -> LocomoData:
    """Read a LoCoMo JSON file (a list of samples); count, never crash on, bad evidence ids."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}; pass the LoCoMo file with --data") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); pass locomo10.json or a subset of it") from None
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of LoCoMo samples at the top level")
    if limit is not None:
        raw = raw[: max(0, int(limit))]
    convs: list[Conversation] = []
    total = scored = no_ev = no_match = ids = repaired = 0
    unmatched: list[str] = []
    for i, sample in enumerate(raw):
        if not isinstance(sample, Mapping):
            raise ConfigError(f"{path}: sample {i} is not an object")
        conv, c = _conversation(sample, f"sample {i}")
        convs.append(conv)
        total += c["total"]
        scored += len(conv.questions)
        no_ev += c["no_evidence"]
        no_match += c["no_match"]
        ids += c["ids"]
        repaired += c["repaired"]
        unmatched.extend(c["unmatched"])
    stats = EvidenceStats(questions_total=total, questions_scored=scored, questions_without_evidence=no_ev,
                          questions_without_matched_evidence=no_match, evidence_ids=ids, repaired_ids=repaired,
                          unmatched_ids=tuple(unmatched))
    return LocomoData(path=str(path), conversations=tuple(convs), stats=stats)


# ------------------------------------------------------------------------------- metric


def evidence_recall(gold: Iterable[str], retrieved: Sequence[Iterable[str]], k: int) -> float:
    """Fraction of the gold dia_ids found among the sources of the top-k retrieved items."""
    gold_set = set(gold)
    if not gold_set:
        raise ConfigError("evidence_recall needs at least one gold id; skip questions without evidence")
    found: set[str] = set()
    for sources in retrieved[:k]:
        found.update(sources)
    return len(gold_set & found) / len(gold_set)
