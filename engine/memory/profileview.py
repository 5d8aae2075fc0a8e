"""The profile as a prompt or a model call sees it: the stored profile within a token budget.

A profile only grows. Induction adds values and keeps them until their sources are superseded,
and a conversation keeps adding things worth keeping. LoCoMo's five conversations, played as one
2,760-turn session, left a profile of 668 values. Shown whole, that was 13.5k tokens in every
prompt and ~21k in every extractor call, and rendering it made the turn's injection grow from 0.3
to 5.6 ms.

So every view of the profile takes `profile_budget` tokens at most, counted line by line: each
field shown costs its "- field: " prefix, and each value costs itself (with its date when it has
one) plus a separator. Values are admitted in a fixed order:
- fields by `FIELD_PRIORITY` (who the user is, then what must not be missed), then any other
  field in the profile's own order;
- within a field, newest first, by the newest record the value rests on;
- a value that does not fit is left out and the next one is tried, until nothing more can fit,
  `MISFITS_MAX` values in a row did not, or `SCAN_MAX` values have been looked at.
The lines keep the profile's own order of fields and values, so between two inductions the
block is byte for byte the same and the prompt cache still hits on it. A value left out is not
lost. It stays stored, its records are retrieved like any others, and a record that backs only
hidden values is rendered under records, because only the shown values hide their records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from engine.core.lru import per_object
from engine.core.records import UserProfile
from engine.core.tokens import TokenCounter
from engine.memory.injection import sanitize_data

__all__ = ["FIELD_PRIORITY", "MISFITS_MAX", "SCAN_MAX", "ProfileBudget", "in_profile_order", "model_view",
           "ranked_values", "shown_profile"]

#: Fields in the order they are given room; fields not listed follow in the profile's order.
FIELD_PRIORITY: tuple[str, ...] = ("name", "identity", "occupation", "relationships", "constraints", "preferences",
                                   "goals", "facts")
#: Values looked at, at most, for one view (the prompt's view reads their sources).
SCAN_MAX = 256
#: Values in a row that may be left out before a view stops looking (the budget is as good as full).
MISFITS_MAX = 8
#: The smallest cost a value can have (itself and its separator): below this much room, stop.
_MIN_COST = 2


@per_object(maxsize=256)
def ranked_values(profile: UserProfile) -> list[tuple[str, str]]:
    """(field, value) pairs in the order a budget admits them (see the module docstring). Values
    resting on no record follow the others, the last learned first. Kept per profile object (the
    store hands back the same one while the profile is unchanged): a turn does not sort them all."""
    order = {k: i for i, k in enumerate(FIELD_PRIORITY)}
    position = {k: i for i, k in enumerate(profile.fields)}
    out: list[tuple[str, str]] = []
    for key in sorted(profile.fields, key=lambda k: (order.get(k, len(order)), position[k])):
        values = list(profile.fields[key])
        newest = [max(profile.sources_of(key, v), default=-1) for v in values]
        out.extend((key, values[j]) for j in sorted(range(len(values)), key=lambda j: (-newest[j], -j)))
    return out


@per_object(maxsize=256)
def _positions(profile: UserProfile) -> dict[tuple[str, str], tuple[int, int]]:
    """Each (field, value) pair's place in the profile: (field's index, value's index)."""
    return {(k, v): (i, j) for i, (k, values) in enumerate(profile.fields.items()) for j, v in enumerate(values)}


class ProfileBudget:
    """Admits values while their lines fit `budget` tokens (`counter`'s count, line by line)."""

    __slots__ = ("budget", "counter", "used", "opened", "looked_at", "misfits")

    def __init__(self, budget: int, counter: TokenCounter):
        self.budget, self.counter = int(budget), counter
        self.used = 0
        self.opened: set[str] = set()
        self.looked_at = 0
        self.misfits = 0  # values left out since the last one admitted

    @property
    def full(self) -> bool:
        """Nothing more can fit, `MISFITS_MAX` values in a row did not, or `SCAN_MAX` were looked at."""
        return self.budget - self.used < _MIN_COST or self.misfits >= MISFITS_MAX or self.looked_at >= SCAN_MAX

    def skip(self) -> None:
        """A value looked at and passed over without a cost (e.g. one whose records are all superseded)."""
        self.looked_at += 1

    def admit(self, key: str, value: str, date: str | None = None) -> bool:
        """Whether the value's line cost fits what is left (and take it when it does)."""
        self.looked_at += 1
        shown = sanitize_data(f"{value} ({date})" if date else value)
        cost = self.counter.count(shown) + 1 + (0 if key in self.opened else self.counter.count(f"- {key}: "))
        if self.used + cost > self.budget:
            self.misfits += 1
            return False
        self.used += cost
        self.misfits = 0
        self.opened.add(key)
        return True


def in_profile_order(profile: UserProfile, pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(field, value) pairs of the profile in its own order of fields and values."""
    where = _positions(profile)
    return sorted(pairs, key=where.__getitem__)


def shown_profile(profile: UserProfile, kept: Iterable[tuple[str, str]]) -> UserProfile:
    """The profile with only the kept (field, value) pairs, in its own order, and only their
    sources (every field stays, empty when none of its values is kept)."""
    fields: dict[str, list[str]] = {k: [] for k in profile.fields}
    sources: dict[str, dict[str, tuple[int, ...]]] = {}
    for k, v in in_profile_order(profile, kept):
        fields[k].append(v)
        ids = profile.sources_of(k, v)
        if ids:
            sources.setdefault(k, {})[v] = ids
    return replace(profile, fields={k: tuple(v) for k, v in fields.items()}, sources=sources)


def model_view(profile: UserProfile, budget: int, counter: TokenCounter) -> dict[str, list[str]]:
    """The profile an extractor or inducer call is shown: the values a `ProfileBudget` admits in
    `ranked_values` order, without dates (no record is read)."""
    admit = ProfileBudget(budget, counter)
    kept = []
    for key, value in ranked_values(profile):
        if admit.full:
            break
        if admit.admit(key, value):
            kept.append((key, value))
    return {k: list(v) for k, v in shown_profile(profile, kept).fields.items() if v}
