"""Command-line options shared by the evaluation commands (replay, compare, tune) and the CLI.

`parse_sets` reads `--set key=value` overrides; `model_settings_from_args` turns `--models`,
`--model`, `--base-url` and `--cassette` into the real models' `ModelSettings` (None: scripted),
`extractor_settings_from_args` `--extractor-base-url` / `--extractor-model` into the extractor's alone;
`store_url` reads `--store`, `--dsn` and `--db`. The `add_*` functions declare those options,
so every command spells them the same way.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.core.errors import ConfigError

__all__ = ["parse_sets", "model_settings_from_args", "extractor_settings_from_args", "store_url", "add_model_args",
           "add_store_args"]


def parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """`--set key=value` pairs; values parsed as JSON when they can be (numbers, lists, true)."""
    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise ConfigError(f"--set {item!r} needs the form key=value, e.g. --set top_k=6")
        key, raw = item.split("=", 1)
        key = key.strip()
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if "." in key:  # weights.alpha=0.5
            head, sub = key.split(".", 1)
            out.setdefault(head, {})[sub] = value
        else:
            out[key] = value
    return out


def model_settings_from_args(args: argparse.Namespace):
    """None for scripted models; else the real models' `ModelSettings` (env, then the flags)."""
    if args.models == "scripted":
        return None
    from engine.roles.llm import ModelSettings

    settings = ModelSettings.from_env()
    overrides: dict[str, Any] = {}
    if args.model:
        overrides["model"] = args.model
    if args.base_url:
        overrides["base_url"] = args.base_url
    if args.models == "cassette":
        if not args.cassette:
            raise ConfigError("--models cassette needs --cassette FILE (a recording made with --models real "
                              "--cassette FILE)")
        overrides.update(cassette=args.cassette, cassette_mode="replay")
    elif args.cassette:
        overrides.update(cassette=args.cassette, cassette_mode="record")
    return replace(settings, **overrides)


def extractor_settings_from_args(args: argparse.Namespace):
    """The extractor role's own `ModelSettings` when `--extractor-base-url` or `--extractor-model`
    is given (the other roles keep `--models`), else None."""
    base_url = getattr(args, "extractor_base_url", None)
    model = getattr(args, "extractor_model", None)
    if not (base_url or model):
        return None
    from engine.roles.llm import ModelSettings

    return ModelSettings(base_url=base_url, **({"model": model} if model else {}))


def store_url(args: argparse.Namespace) -> str | None:
    """The store the command opens: a PostgreSQL URL ("postgres" = a local server), a SQLite file,
    or None (SQLite in memory)."""
    if getattr(args, "store", "sqlite") == "postgres":
        return args.dsn or "postgres"
    return getattr(args, "db", None)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", choices=("scripted", "real", "cassette"), default="scripted",
                   help="scripted (offline, default), real (a LangChain chat model), cassette (replay a recording)")
    p.add_argument("--model", default=None, help="model name, e.g. deepseek-chat or openai:gpt-4o-mini")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible server (local vLLM / Ollama)")
    p.add_argument("--cassette", default=None, help="cassette file to record to (real) or replay from (cassette)")
    p.add_argument("--extractor-base-url", default=None, metavar="URL",
                   help="the extractor role alone on this OpenAI-compatible server (e.g. a compact local model)")
    p.add_argument("--extractor-model", default=None, metavar="NAME", help="the extractor's model name on that server")


def add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="sqlite", help="sqlite (default) or postgres")
    p.add_argument("--dsn", default=None, help="PostgreSQL URL (with --store postgres); none starts a local server")
    p.add_argument("--db", default=None, help="SQLite database file (default: in memory)")
