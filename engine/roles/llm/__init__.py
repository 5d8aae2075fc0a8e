"""Real model roles on LangChain chat models: structured output, bounded retries, logged repair.

`make_chat_model(ModelSettings())` builds the chat model (DeepSeek by default, any
`init_chat_model` provider, or any OpenAI-compatible base URL such as a local vLLM or Ollama);
`real_roles(settings)` wraps it in one object per role of engine.roles. Every role records its
calls in its ledger: the engine hands its own to them (`Models.bind_ledger`).

The modules: `guard` (the switch that forbids real requests, the loopback check, the guarded
HTTP clients), `settings` (ModelSettings, make_chat_model), `repairs` (mechanical repairs of a
structured answer), `base` (LLMRole: retries, error classification, repairs, ledger entries),
`roles` (the five roles and their static prompts). The client's own retries are off
(max_retries=0) so every HTTP attempt is visible and recorded.
"""

from __future__ import annotations

from engine.core.config import repair_weights
from engine.roles.ledger import Ledger, record_chat_call, usage_from_message
from engine.roles.llm.base import LLMRole, RoleResult
from engine.roles.llm.guard import (
    FORBID_ENV,
    MemlabAsyncHttpClient,
    MemlabHttpClient,
    allow_real_requests,
    forbid_real_requests,
    is_loopback_url,
    real_requests_forbidden,
)
from engine.roles.llm.roles import (
    LLMConsolidator,
    LLMExtractor,
    LLMProfileInducer,
    LLMQueryParser,
    LLMTuner,
)
from engine.roles.llm.settings import (
    DEEPSEEK_API_BASE,
    DEFAULT_KEY_ENV,
    LOCAL_DUMMY_KEY,
    ModelSettings,
    make_chat_model,
)

__all__ = [
    "ModelSettings",
    "make_chat_model",
    "forbid_real_requests",
    "allow_real_requests",
    "real_requests_forbidden",
    "is_loopback_url",
    "usage_from_message",
    "record_chat_call",
    "repair_weights",
    "RoleResult",
    "LLMRole",
    "LLMExtractor",
    "LLMQueryParser",
    "LLMConsolidator",
    "LLMTuner",
    "LLMProfileInducer",
    "real_roles",
    "FORBID_ENV",
    "DEEPSEEK_API_BASE",
    "DEFAULT_KEY_ENV",
    "LOCAL_DUMMY_KEY",
    "MemlabHttpClient",
    "MemlabAsyncHttpClient",
]


def real_roles(settings: ModelSettings | None = None) -> dict[str, object]:
    """Every role of engine.roles.ROLE_NAMES on one chat model built from `settings`.

    The five memory roles share one ledger of their own until an engine binds its ledger
    (`Models.bind_ledger`); read the calls from the engine's ledger, not from here.
    """
    s = settings or ModelSettings()
    ledger = Ledger()
    chat = make_chat_model(s)
    return {
        "extractor": LLMExtractor(chat, settings=s, ledger=ledger),
        "query_parser": LLMQueryParser(chat, settings=s, ledger=ledger),
        "consolidator": LLMConsolidator(chat, settings=s, ledger=ledger),
        "tuner": LLMTuner(chat, settings=s, ledger=ledger),
        "inducer": LLMProfileInducer(chat, settings=s, ledger=ledger),
        "chat": chat,
    }
