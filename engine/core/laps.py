"""Where a piece of work spent its wall time, stage by stage (milliseconds), for benchmarks and the lab.

A `Laps` is started when the work starts; `lap(name)` charges the time since the previous lap (or
the start) to `name`, adding up when a stage comes back. Nothing ever decides anything from these
numbers: they are measurements of the machine (`time.perf_counter`), never the memory's time,
which only the clock gives, so they stay out of the log and out of equality (replays compare equal
whatever the machine's speed). A lap costs about a tenth of a microsecond.
"""

from __future__ import annotations

from time import perf_counter

__all__ = ["Laps"]


class Laps:
    """Milliseconds by stage name, in the order the stages first ran."""

    __slots__ = ("ms", "_t")

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t = perf_counter()

    def lap(self, name: str) -> None:
        """Charge the time since the last lap (or the start) to `name`."""
        t = perf_counter()
        self.ms[name] = self.ms.get(name, 0.0) + (t - self._t) * 1000.0
        self._t = t

    def skip(self) -> None:
        """Charge nothing for the time since the last lap (work measured elsewhere, or not at all)."""
        self._t = perf_counter()

    def add(self, other: dict[str, float]) -> None:
        """Fold another measurement's stages in, as measured there."""
        for name, ms in other.items():
            self.ms[name] = self.ms.get(name, 0.0) + ms
