"""Scenarios: scripted conversations with clock steps and probes, parsed strictly.

A scenario is YAML (see scenarios/*.yaml and the README). Unknown keys, bad durations and
missing fields are errors that name the file, the line and the fix. Scenarios are data: the one
driver (engine.eval.driver) plays them, and `keyword_in` is the probe check's matching rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from engine.core.clock import parse_datetime, parse_duration
from engine.core.config import MemoryConfig
from engine.core.errors import ClockError, ConfigError, ScenarioError

__all__ = ["Scenario", "Turn", "Probe", "load_scenario", "parse_scenario", "keyword_in"]

_TOP_KEYS = {"name", "description", "user", "preset", "start", "turn_seconds", "turns", "probes", "config",
             "users"}
_TURN_KEYS = {"user", "advance", "session", "as", "name"}
_PROBE_KEYS = {"ask", "expect", "reject", "as", "advance", "session"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    text: str | None = None
    advance: timedelta | None = None
    new_session: bool = False
    speaker: str | None = None  # `as:` another user of the scenario
    name: str | None = None  # display name of the speaker (e.g. LoCoMo speakers)
    line: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Probe:
    ask: str
    expect: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    speaker: str | None = None
    advance: timedelta | None = None
    new_session: bool = False
    line: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    user: str
    preset: str
    start: datetime
    turn_seconds: float
    turns: tuple[Turn, ...]
    probes: tuple[Probe, ...]
    config: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    path: str = ""

    def memory_config(self, *, preset: str | None = None, overrides: Mapping[str, Any] | None = None) -> MemoryConfig:
        values = dict(self.config)
        values.update(overrides or {})
        chosen = preset or self.preset
        try:
            if chosen.lower().endswith((".toml", ".json")):  # a saved preset file (e.g. from memlab tune)
                return MemoryConfig.load(chosen).with_overrides(**values)
            return MemoryConfig.from_preset(chosen, **values)
        except ConfigError as exc:
            raise ConfigError(exc.problems, source=self.path or self.name) from None

    @property
    def users(self) -> list[str]:
        out = [self.user]
        for t in (*self.turns, *self.probes):
            if t.speaker and t.speaker not in out:
                out.append(t.speaker)
        return out


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping (as key '__line__')."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict:
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file; list the bundled ones with `ls scenarios/`") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not UTF-8 text; save the scenario as UTF-8") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse_scenario(text, source=str(path))


def parse_scenario(text: str, *, source: str = "<scenario>") -> Scenario:
    """Parse and validate scenario YAML; every error names the source, the line and the fix."""
    try:
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ScenarioError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)}); check indentation and quotes") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise ScenarioError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}:1: a scenario is a mapping with name, user, start, turns and probes")

    def err(line: Any, msg: str) -> ScenarioError:
        return ScenarioError(f"{source}:{line}: {msg}")

    top_line = data.pop("__line__", 1)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise err(top_line, f"unknown key(s) {unknown}; allowed: {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "user", "start", "turns"):
        if key not in data:
            raise err(top_line, f"missing `{key}`; a scenario needs name, user, start and turns")
    name = _str(data["name"], "name", top_line, err)
    user = _str(data["user"], "user", top_line, err)
    preset = data.get("preset", "customer service")
    try:
        MemoryConfig.from_preset(preset)
    except ConfigError as exc:
        raise err(top_line, f"`preset`: {exc.problems[0]}") from None
    start_raw = data["start"]
    try:
        start = start_raw if isinstance(start_raw, datetime) else parse_datetime(str(start_raw), what="start")
        if start.tzinfo is None:
            raise ClockError("naive")
    except ClockError:
        raise err(top_line, f"`start: {start_raw}` needs a date, time and offset, e.g. 2026-03-02T09:00:00+08:00") from None
    try:
        turn_seconds = parse_duration(data.get("turn_seconds", 35)).total_seconds()
    except ClockError as exc:
        raise err(top_line, f"`turn_seconds`: {exc}") from None
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise err(top_line, "`config` must be a mapping of MemoryConfig keys to values")
    config.pop("__line__", None)
    try:
        MemoryConfig.from_preset(preset, **config)
    except ConfigError as exc:
        raise err(top_line, "`config`: " + "; ".join(exc.problems)) from None
    turns_raw = data["turns"]
    if not isinstance(turns_raw, list) or not turns_raw:
        raise err(top_line, "`turns` must be a non-empty list of turns (- user: ..., - advance: 3d, - session: new)")
    turns = tuple(_parse_turn(t, err, top_line) for t in turns_raw)
    probes_raw = data.get("probes") or []
    if not isinstance(probes_raw, list):
        raise err(top_line, "`probes` must be a list of {ask, expect, reject}")
    probes = tuple(_parse_probe(p, err, top_line) for p in probes_raw)
    return Scenario(name=name, user=user, preset=str(preset), start=start, turn_seconds=turn_seconds, turns=turns,
                    probes=probes, config=config, description=str(data.get("description", "") or ""), path=source)


def _str(value: Any, key: str, line: Any, err) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
        raise err(line, f"`{key}` must be a non-empty string")
    return str(value)


def _duration(value: Any, key: str, line: Any, err) -> timedelta:
    try:
        d = parse_duration(value)
    except ClockError as exc:
        raise err(line, f"`{key}: {value}`: {exc}") from None
    if d < timedelta(0):
        raise err(line, f"`{key}: {value}` is negative; the clock only moves forward")
    return d


def _parse_turn(raw: Any, err, parent_line: int) -> Turn:
    if not isinstance(raw, dict):
        raise err(parent_line, f"each turn must be a mapping like `- user: \"...\"`, got {raw!r}")
    line = raw.pop("__line__", parent_line)
    unknown = sorted(set(raw) - _TURN_KEYS)
    if unknown:
        raise err(line, f"unknown turn key(s) {unknown}; allowed: {', '.join(sorted(_TURN_KEYS))}")
    if not raw:
        raise err(line, "empty turn; give `user:`, `advance:` or `session: new`")
    text = raw.get("user")
    if text is not None and (not isinstance(text, (str, int, float)) or isinstance(text, bool)):
        raise err(line, "`user:` must be the message text")
    session = raw.get("session")
    if session is not None and session != "new":
        raise err(line, f"`session: {session}` is not understood; write `session: new`")
    advance = _duration(raw["advance"], "advance", line, err) if "advance" in raw else None
    speaker = raw.get("as")
    if speaker is not None and (not isinstance(speaker, str) or not speaker.strip()):
        raise err(line, "`as:` must name a user id")
    return Turn(text=None if text is None else str(text), advance=advance, new_session=session == "new",
                speaker=speaker, name=raw.get("name"), line=line)


def _parse_probe(raw: Any, err, parent_line: int) -> Probe:
    if not isinstance(raw, dict):
        raise err(parent_line, f"each probe must be a mapping with `ask:` and `expect:`, got {raw!r}")
    line = raw.pop("__line__", parent_line)
    unknown = sorted(set(raw) - _PROBE_KEYS)
    if unknown:
        raise err(line, f"unknown probe key(s) {unknown}; allowed: {', '.join(sorted(_PROBE_KEYS))}")
    if "ask" not in raw or not isinstance(raw["ask"], str) or not raw["ask"].strip():
        raise err(line, "a probe needs `ask:` with the question text")

    def kw_list(key: str) -> tuple[str, ...]:
        v = raw.get(key) or []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, (str, int)) and str(x).strip() for x in v):
            raise err(line, f"`{key}:` must be a list of keywords, e.g. [\"Li Mingxuan\"]")
        return tuple(str(x) for x in v)

    session = raw.get("session")
    if session is not None and session != "new":
        raise err(line, f"`session: {session}` is not understood; write `session: new`")
    return Probe(ask=raw["ask"], expect=kw_list("expect"), reject=kw_list("reject"), speaker=raw.get("as"),
                 advance=_duration(raw["advance"], "advance", line, err) if "advance" in raw else None,
                 new_session=session == "new", line=line)


def keyword_in(keyword: str, text: str) -> bool:
    """Case-insensitive containment with whitespace normalised (exact for Chinese)."""
    k = " ".join(str(keyword).lower().split())
    t = " ".join(str(text).lower().split())
    return bool(k) and k in t
