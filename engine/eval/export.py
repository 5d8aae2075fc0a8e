"""`memlab export-extractions`: the windows the extractor saw and the records it returned, as
chat-format training pairs (JSONL), to train or evaluate a compact extractor.

Every extraction window logs an "extraction" event (engine.memory.extraction.extraction_entry):
the window as a model extractor gets it and the records the extractor returned, whichever
extractor it was (scripted, a real model, a local server via `--extractor-base-url`). One line per
event:

    {"messages": [{"role": "system", "content": <LLMExtractor's system prompt>},
                  {"role": "user", "content": <the window as compact JSON, byte for byte the request>},
                  {"role": "assistant", "content": <the returned records as compact JSON>}],
     "meta": {"scenario", "user", "session", "event_id", "event_no", "at", "purpose", "extractor", "model"}}

`purpose` is "event" (a memory event's window: context, then the new messages records rest on) or
"live-window" (the contradiction guard reading pending user messages, no context).

The source is scenario files (replayed through the one driver, like `memlab replay`, with the
command's store, embedder and models) or a database (`--db FILE`, `--store postgres`). The same
input gives the same file byte for byte.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError
from engine.core.records import Event

__all__ = ["training_pair", "pairs_from_events", "export_scenarios", "export_store", "export_main", "write_jsonl",
           "add_export_args", "system_prompt"]

# The model roles load lazily: the CLI imports this module to declare the command's options.


def system_prompt() -> str:
    """The system prompt of every pair: the real extractor's, the one a model trained on the pairs gets."""
    from engine.roles.llm.roles import LLMExtractor

    return LLMExtractor.instructions


def _user_content(event: Event) -> str:
    """The window exactly as LLMExtractor sends it, rebuilt through `ExtractionInput.payload` so key
    order does not depend on how the store kept the JSON (PostgreSQL's jsonb reorders keys)."""
    from engine.roles.llm.base import compact_json
    from engine.roles.types import ExtractionInput, WindowMessage

    p = event.payload["input"]
    inp = ExtractionInput(user_id=event.user_id, session_id=str(event.payload.get("session", "")),
                          context=[WindowMessage.model_validate(m) for m in p.get("context", [])],
                          new=[WindowMessage.model_validate(m) for m in p.get("new", [])], profile=p.get("profile"))
    return compact_json(inp.payload())


def _assistant_content(event: Event) -> str:
    from engine.roles.llm.base import compact_json
    from engine.roles.types import ExtractionOutput

    return compact_json(ExtractionOutput.model_validate(event.payload["output"]).dump())


def training_pair(event: Event, *, scenario: str | None = None) -> dict[str, Any]:
    """One "extraction" event as a chat-format training pair with its provenance."""
    p = event.payload
    return {
        "messages": [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": _user_content(event)},
            {"role": "assistant", "content": _assistant_content(event)},
        ],
        "meta": {"scenario": scenario, "user": event.user_id, "session": p.get("session"), "event_id": event.id,
                 "event_no": event.event_no, "at": event.at.isoformat(), "purpose": p.get("purpose"),
                 "extractor": p.get("extractor"), "model": p.get("model")},
    }


def pairs_from_events(events: Iterable[Event], *, scenario: str | None = None,
                      skip_empty: bool = False) -> list[dict[str, Any]]:
    """The training pairs of the "extraction" events among `events`, in event id order."""
    chosen = sorted((e for e in events if e.kind == "extraction"), key=lambda e: e.id or 0)
    pairs = [training_pair(e, scenario=scenario) for e in chosen]
    if skip_empty:
        pairs = [x for x in pairs if json.loads(x["messages"][2]["content"])["records"]]
    return pairs


def export_scenarios(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Replay each scenario of `args.scenarios` (as `memlab replay` does) and collect its pairs."""
    from engine.eval.options import model_settings_from_args, parse_sets
    from engine.eval.replay import replay
    from engine.eval.replay_cli import engine_factory
    from engine.eval.scenario import load_scenario

    overrides = parse_sets(args.set)
    settings = model_settings_from_args(args)
    pairs: list[dict[str, Any]] = []
    for path in args.scenarios:
        sc = load_scenario(path)
        res = replay(sc, config=sc.memory_config(preset=args.preset, overrides=overrides),
                     engine_factory=engine_factory(args, settings))
        events = [Event.from_dict(d) for d in res.event_log]
        pairs += pairs_from_events(events, scenario=Path(path).name, skip_empty=args.skip_empty)
    return pairs


def export_store(url: str, *, skip_empty: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The pairs of every "extraction" event in the store at `url`, and its count of "extract" events
    (windows extracted, with or without their recorded input)."""
    from engine.stores.base import open_store

    if "://" not in url and url != "postgres" and not Path(url).is_file():
        raise ConfigError(f"no database at {url}: give an existing SQLite file (e.g. one written by "
                          f"`memlab replay SCENARIO --db {url}`)")
    store = open_store(url)
    try:
        pairs = pairs_from_events(store.events(kind="extraction"), skip_empty=skip_empty)
        windows = len(store.events(kind="extract"))
    finally:
        store.close()
    return pairs, windows


def write_jsonl(pairs: Sequence[dict[str, Any]], out: str | Path) -> None:
    """One pair per line; keys as built (messages, then meta), non-ASCII kept."""
    text = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")


def _empty_message(source: str, windows: int) -> str:
    if windows:
        return (f"memlab: no extractions to export from {source}: its {windows} extraction window(s) were logged "
                "without the extractor's input and output (an older memlab); replay the conversations again")
    return (f"memlab: no extractions to export from {source}: nothing was extracted there (no gate opened); "
            "replay scenarios into it first, e.g. `memlab replay scenarios/needle-basic.yaml --db FILE`")


def export_main(args: argparse.Namespace) -> int:
    """`memlab export-extractions [SCENARIO...] --out FILE.jsonl` (or `--db FILE` alone)."""
    from engine.eval.options import store_url

    url = store_url(args)
    if args.scenarios:
        pairs, windows, source = export_scenarios(args), 0, f"{len(args.scenarios)} scenario file(s)"
    elif url:
        pairs, windows = export_store(url, skip_empty=args.skip_empty)
        source = url
    else:
        raise ConfigError("give scenario files to replay or a database: memlab export-extractions "
                          "scenarios/*.yaml --out FILE.jsonl, or --db FILE --out FILE.jsonl")
    if not pairs:
        print(_empty_message(source, windows), file=sys.stderr)
        return 1
    write_jsonl(pairs, args.out)
    records = sum(len(json.loads(p["messages"][2]["content"])["records"]) for p in pairs)
    by = Counter(f"{p['meta']['extractor']} ({p['meta']['model']})" for p in pairs)
    print(f"wrote {len(pairs)} extraction pairs ({records} records) from {source} to {args.out}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    return 0


def add_export_args(p: argparse.ArgumentParser) -> None:
    """The options of `memlab export-extractions` (models and store options come from engine.eval.options)."""
    p.add_argument("scenarios", nargs="*", help="scenario files to replay (none: read --db)")
    p.add_argument("--out", required=True, metavar="FILE.jsonl")
    p.add_argument("--preset", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--embedder", default="hash", choices=("hash", "minilm"))
    p.add_argument("--skip-empty", action="store_true", help="leave out windows the extractor found nothing in")
