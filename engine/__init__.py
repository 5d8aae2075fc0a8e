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
    "Clock": "core.clock",
    "VirtualClock": "core.clock",
    "SystemClock": "core.clock",
    "parse_duration": "core.clock",
    "parse_datetime": "core.clock",
    # data
    "Message": "core.records",
    "MemoryRecord": "core.records",
    "TimeSpan": "core.records",
    "SourcePointer": "core.records",
    "UserProfile": "core.records",
    "ProfileHistoryEntry": "core.records",
    "Event": "core.records",
    "ScoreRow": "core.records",
    # config and math
    "MemoryConfig": "core.config",
    "Weights": "core.config",
    "PRESETS": "core.config",
    "maturity": "core.forgetting",
    "decay": "core.forgetting",
    "importance": "core.forgetting",
    "relevance": "core.forgetting",
    "score": "core.forgetting",
    "gate_time": "core.forgetting",
    "tag_union": "core.forgetting",
    # errors
    "ConfigError": "core.errors",
    "ClockError": "core.errors",
    "ScenarioError": "core.errors",
    "StoreError": "core.errors",
    "CursorRewindError": "core.errors",
    "ModelOutputError": "core.errors",
    "ModelCallError": "core.errors",
    "MemlabError": "core.errors",
    # parts
    "Store": "stores.base",
    "open_store": "stores.base",
    "SQLiteStore": "stores.sqlite",
    "HashEmbeddings": "roles.embeddings",
    "MiniLMEmbeddings": "roles.embeddings",
    "make_embedder": "roles.embeddings",
    "ApproxTokenCounter": "core.tokens",
    "Ledger": "roles.ledger",
    "CallRecord": "roles.ledger",
    # the engine
    "MemoryEngine": "memory.engine",
    "Models": "roles.bundle",
    "TurnResult": "memory.engine",
    "Retrieval": "memory.engine",
    "IngestResult": "memory.engine",
    "BuiltPrompt": "memory.injection",
    "MemoryMiddleware": "integrations.langgraph",
    "ModelSettings": "roles.llm",
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
