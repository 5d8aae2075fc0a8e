"""Offline, rule-based stand-ins for every model role, plus a scripted LangChain chat model.

They are honest: deterministic rules over the text they are given, never an invented fact. They
let the whole engine (extraction, update, tuning, profiles, replies) run and be tested without a
network, and they are what the lab uses until a real model is configured. English and Chinese.

Outside this package and the tests, get them through `engine.roles.bundle.Models.scripted()`
(`.chat` is the scripted chat model); nothing else imports from here.

The modules: `lang` (the shared language rules), `names` (is this a person's name?), `people`
(who he, she and 她 refer to), `intent` (requests, imperatives, one-off or lasting), `salience`
(safety, life events, open problems, filler, whose preference), `extractor`, `query`,
`consolidator`, `tuner`, `inducer`, `chat`.
"""

from __future__ import annotations

from engine.roles.scripted.chat import ScriptedChatModel
from engine.roles.scripted.consolidator import ScriptedConsolidator
from engine.roles.scripted.extractor import ScriptedExtractor
from engine.roles.scripted.inducer import ScriptedProfileInducer
from engine.roles.scripted.lang import THEMES
from engine.roles.scripted.query import ScriptedQueryParser
from engine.roles.scripted.tuner import ScriptedTuner
from engine.roles.types import ROLE_NAMES

__all__ = [
    "ScriptedExtractor",
    "ScriptedQueryParser",
    "ScriptedConsolidator",
    "ScriptedTuner",
    "ScriptedProfileInducer",
    "ScriptedChatModel",
    "scripted_roles",
    "THEMES",
]


def scripted_roles() -> dict[str, object]:
    """One scripted instance of every model role, keyed by engine.roles.ROLE_NAMES."""
    makers = {
        "extractor": ScriptedExtractor,
        "query_parser": ScriptedQueryParser,
        "consolidator": ScriptedConsolidator,
        "tuner": ScriptedTuner,
        "inducer": ScriptedProfileInducer,
        "chat": ScriptedChatModel,
    }
    return {name: makers[name]() for name in ROLE_NAMES}
