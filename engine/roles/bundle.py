"""`Models`: the set of role implementations an engine calls (five memory roles and the chat model)."""

from __future__ import annotations

from dataclasses import dataclass
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

    @classmethod
    def scripted(cls) -> Models:
        from engine.roles.scripted import scripted_roles

        return cls(**scripted_roles(), mode="scripted", label="scripted models (offline stand-ins)")

    @classmethod
    def real(cls, settings: Any = None, *, ledger: Ledger | None = None) -> Models:
        from engine.roles.llm import ModelSettings, real_roles

        settings = settings or ModelSettings.from_env()
        roles = real_roles(settings, ledger or Ledger())
        return cls(**roles, mode="real", label=f"real: {settings.model}", settings=settings)
