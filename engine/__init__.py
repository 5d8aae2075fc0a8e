"""memlab's engine: long-term memory for LLM agents.

Forgetting-curve scoring (maturity, decay, importance, relevance) over dimensional memory records
(time, location, reason, purpose, keywords), tri-path retrieval, dimension-aware update, and a
turn pipeline under an injected clock. Heavy parts (the store driver, LangChain, torch) load on
first use, so `import engine` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # time
    "Clock": "clock",
    "VirtualClock": "clock",
    "SystemClock": "clock",
    "parse_duration": "clock",
    "parse_datetime": "clock",
    # data
    "Message": "models",
    "MemoryRecord": "models",
    "TimeSpan": "models",
    "SourcePointer": "models",
    "UserProfile": "models",
    "ProfileHistoryEntry": "models",
    "Event": "models",
    "ScoreRow": "models",
    # config and math
    "MemoryConfig": "config",
    "Weights": "config",
    "PRESETS": "config",
    "maturity": "forgetting",
    "decay": "forgetting",
    "importance": "forgetting",
    "relevance": "forgetting",
    "score": "forgetting",
    "gate_time": "forgetting",
    "tag_union": "forgetting",
    # errors
    "ConfigError": "errors",
    "ClockError": "errors",
    "ScenarioError": "errors",
    "StoreError": "errors",
    "CursorRewindError": "errors",
    "ModelOutputError": "errors",
    "ModelCallError": "errors",
    "MemlabError": "errors",
    # parts
    "Store": "store",
    "open_store": "store",
    "SQLiteStore": "sqlite_store",
    "HashEmbeddings": "embeddings",
    "MiniLMEmbeddings": "embeddings",
    "make_embedder": "embeddings",
    "ApproxTokenCounter": "tokens",
    "Ledger": "ledger",
    "CallRecord": "ledger",
    # the engine
    "MemoryEngine": "pipeline",
    "Models": "pipeline",
    "TurnResult": "pipeline",
    "Retrieval": "pipeline",
    "BuiltPrompt": "injection",
    "MemoryMiddleware": "middleware",
    "ModelSettings": "llm",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
