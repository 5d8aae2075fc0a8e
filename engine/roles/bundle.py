"""`Models`: the set of role implementations an engine calls (five memory roles and the chat model)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from engine.roles.ledger import Ledger

__all__ = ["Models"]


@dataclass
class Models:
    """One implementation per role; `chat` is a LangChain chat model."""

    extractor: Any
    query_parser: Any
    consolidator: Any
    tuner: Any
    inducer: Any
    chat: Any
    mode: str = "scripted"
    label: str = "scripted models (offline stand-ins)"
    settings: Any = None  # the real models' ModelSettings (prices for the chat call's ledger entry)

    ROLES = ("extractor", "query_parser", "consolidator", "tuner", "inducer")

    def bind_ledger(self, ledger: Ledger) -> Models:
        """Hand the engine's ledger to every role that records its own calls (the real roles).

        The engine owns one ledger; roles built without one record into it from here on.
        """
        for name in self.ROLES:
            role = getattr(self, name)
            if hasattr(role, "ledger"):
                role.ledger = ledger
        return self

    def with_extractor(self, settings: Any) -> Models:
        """The same roles, with the extractor on the chat model `settings` describe (a
        `ModelSettings`): e.g. a compact local extractor behind an OpenAI-compatible base URL while
        every other role stays as it is. The engine binds its ledger to it like to the others."""
        from engine.roles.llm import LLMExtractor, make_chat_model

        extractor = LLMExtractor(make_chat_model(settings), settings=settings)
        where = f" at {settings.target_url}" if settings.target_url else ""
        return replace(self, extractor=extractor, label=f"{self.label}; extractor: {settings.model}{where}")

    @classmethod
    def scripted(cls) -> Models:
        """The offline stand-ins for every role (their `chat` is the scripted chat model).

        This is the one way code outside engine.roles.scripted gets a scripted role, e.g.
        `Models.scripted().chat` for a scripted LangChain chat model.
        """
        from engine.roles.scripted import scripted_roles

        return cls(**scripted_roles(), mode="scripted", label="scripted models (offline stand-ins)")

    @classmethod
    def real(cls, settings: Any = None, *, query_parsing: str = "rules") -> Models:
        """Real roles on the chat model `settings` describe (ModelSettings.from_env() by default).

        Their calls go to the ledger the engine binds (MemoryEngine does it in its constructor);
        read them from `engine.ledger`. Queries are parsed by the rules, the model called only when
        the rules cannot resolve a question (`query_parsing="rules"`, the default: a parser call
        per turn is most of a memory's cost), or by the model every turn (`"model"`).
        """
        from engine.roles.llm import ModelSettings, real_roles
        from engine.roles.rules import FallbackQueryParser, RuleQueryParser

        if query_parsing not in ("rules", "model"):
            from engine.core.errors import ConfigError

            raise ConfigError(f"query_parsing {query_parsing!r} must be 'rules' or 'model'")
        settings = settings or ModelSettings.from_env()
        roles = real_roles(settings)
        if query_parsing == "rules":
            roles["query_parser"] = FallbackQueryParser(RuleQueryParser(), roles["query_parser"])
        return cls(**roles, mode="real", label=f"real: {settings.model}", settings=settings)
