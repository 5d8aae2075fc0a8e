"""A retrieval's logged score rows as columns: what the log stores as ONE entry per retrieval.

A retrieval logs ~24 `ScoreRow`s. Stored one table row each, they cost a row object, a dict, a
JSON text and an insert (two B-tree entries) apiece: ~0.3 ms of a turn's ~0.7 ms log step
(measured). `ScoreColumns` holds the same values as one list per field, written as one JSON
object in one row of `scores` (its `record_id` is `BATCH_RECORD_ID`); read back, it is a sequence
of exactly the `ScoreRow`s the rows would have been (built when read). The stores read both
shapes: entries written one row each stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.records import ScoreRow

__all__ = ["BATCH_RECORD_ID", "ScoreColumns", "is_batch", "score_rows"]

#: The `record_id` of a `scores` row holding a whole retrieval's rows (no record has id 0).
BATCH_RECORD_ID = 0
#: The key that marks a stored JSON object as a batch (a ScoreRow's dict never has it).
_MARK = "columns"


@dataclass(frozen=True, slots=True, eq=False)
class ScoreColumns(Sequence[ScoreRow]):
    """Score rows field by field: `record_id[j]`, `ranks[path][j]`, `path_scores[path][j]`, ... are
    row j's values. Indexing builds the `ScoreRow` (`ScoreRow.from_dict` of row j's dict)."""

    record_id: list[int]
    ranks: dict[str, list[int | None]]
    path_scores: dict[str, list[float]]
    R: list[float]
    T: list[float]
    F: list[float]
    parts: dict[str, list[float]]
    S: list[float]
    verdict: list[str]
    why: list[str]
    tokens: list[int]
    position: list[int | None]

    def __len__(self) -> int:
        return len(self.record_id)

    def __getitem__(self, j):  # type: ignore[override]
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        if not -len(self) <= j < len(self):
            raise IndexError(j)
        return ScoreRow(record_id=self.record_id[j], ranks={p: v[j] for p, v in self.ranks.items()},
                        path_scores={p: v[j] for p, v in self.path_scores.items()}, R=self.R[j], T=self.T[j],
                        F=self.F[j], parts={p: v[j] for p, v in self.parts.items()}, S=self.S[j],
                        verdict=self.verdict[j], why=self.why[j], tokens=self.tokens[j], position=self.position[j])

    def to_json_obj(self) -> dict[str, Any]:
        return {_MARK: len(self), "record_id": self.record_id, "ranks": self.ranks, "path_scores": self.path_scores,
                "R": self.R, "T": self.T, "F": self.F, "parts": self.parts, "S": self.S, "verdict": self.verdict,
                "why": self.why, "tokens": self.tokens, "position": self.position}

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any]) -> ScoreColumns:
        """The columns of a stored batch; a malformed one raises ValueError."""
        try:
            n = int(obj[_MARK])
            cols = cls(record_id=list(obj["record_id"]), ranks=dict(obj["ranks"]), path_scores=dict(obj["path_scores"]),
                       R=list(obj["R"]), T=list(obj["T"]), F=list(obj["F"]), parts=dict(obj["parts"]), S=list(obj["S"]),
                       verdict=list(obj["verdict"]), why=list(obj["why"]), tokens=list(obj["tokens"]),
                       position=list(obj["position"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a malformed batch of score rows: {exc!r}") from exc
        lists = [cols.record_id, cols.R, cols.T, cols.F, cols.S, cols.verdict, cols.why, cols.tokens, cols.position,
                 *cols.ranks.values(), *cols.path_scores.values(), *cols.parts.values()]
        if any(len(v) != n for v in lists):
            raise ValueError(f"a malformed batch of score rows: columns of unequal length (expected {n})")
        return cols

    @classmethod
    def of(cls, rows: Iterable[ScoreRow]) -> ScoreColumns:
        """The columns of given rows (they must name the same paths and parts, as one retrieval's do)."""
        rows = list(rows)
        first = rows[0] if rows else None
        paths = list(first.ranks) if first else []
        scored = list(first.path_scores) if first else []
        parts = list(first.parts) if first else []
        if any(list(r.ranks) != paths or list(r.path_scores) != scored or list(r.parts) != parts for r in rows):
            raise ValueError("rows of one batch must name the same paths and parts")
        return cls(record_id=[r.record_id for r in rows], ranks={p: [r.ranks[p] for r in rows] for p in paths},
                   path_scores={p: [r.path_scores[p] for r in rows] for p in scored}, R=[r.R for r in rows],
                   T=[r.T for r in rows], F=[r.F for r in rows], parts={p: [r.parts[p] for r in rows] for p in parts},
                   S=[r.S for r in rows], verdict=[r.verdict for r in rows], why=[r.why for r in rows],
                   tokens=[r.tokens for r in rows], position=[r.position for r in rows])

    def only(self, record_ids: Iterable[int]) -> ScoreColumns:
        """The rows of the given record ids, in their order here."""
        keep = set(record_ids)
        js = [j for j, rid in enumerate(self.record_id) if rid in keep]

        def pick(v: list) -> list:
            return [v[j] for j in js]

        return ScoreColumns(record_id=pick(self.record_id), ranks={p: pick(v) for p, v in self.ranks.items()},
                            path_scores={p: pick(v) for p, v in self.path_scores.items()}, R=pick(self.R),
                            T=pick(self.T), F=pick(self.F), parts={p: pick(v) for p, v in self.parts.items()},
                            S=pick(self.S), verdict=pick(self.verdict), why=pick(self.why), tokens=pick(self.tokens),
                            position=pick(self.position))


def is_batch(obj: Any) -> bool:
    """Whether a stored score entry's JSON is a batch (else one ScoreRow's dict)."""
    return isinstance(obj, Mapping) and _MARK in obj


def score_rows(entries: Sequence[Any]) -> list[ScoreRow]:
    """The ScoreRows of stored entries' JSON values, in order (a batch expands into its rows)."""
    out: list[ScoreRow] = []
    for obj in entries:
        if is_batch(obj):
            out.extend(ScoreColumns.from_json_obj(obj))
        else:
            out.append(ScoreRow.from_dict(obj))
    return out
