"""Extraction windows and the records they yield.

An event extracts the pending messages in overlapping windows: each window's `new` messages are
the ones its records may rest on; the `overlap` messages before them are context only. The
extractor's proposals become `MemoryRecord`s here: source ids outside the window fall back to the
window's last message, times are parsed into spans, the source time is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.core.errors import MemlabError
from engine.core.records import MemoryRecord, Message, SourcePointer, UserProfile
from engine.core.timespans import parse_time_label
from engine.memory.context import EngineContext
from engine.roles.types import ExtractionInput, ExtractionOutput, WindowMessage

__all__ = ["Window", "windows", "window_message", "profile_name", "to_records", "extraction_entry",
           "call_extractor", "says_nothing", "contentless", "recall_question"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """One extraction window: context messages (not extracted) and new messages (extracted)."""

    context: tuple[Message, ...]
    new: tuple[Message, ...]

    def as_input(self, user_id: str, session_id: str, name: str | None,
                 profile: dict[str, list[str]] | None = None) -> ExtractionInput:
        return ExtractionInput(user_id=user_id, session_id=session_id,
                               context=[window_message(m, name) for m in self.context],
                               new=[window_message(m, name) for m in self.new], profile=profile)


def windows(pending: Sequence[Message], before: Sequence[Message], *, size: int, overlap: int) -> Iterator[Window]:
    """Overlapping windows over `pending`; `before` is the tail already processed (for context)."""
    step = size - overlap
    for start in range(0, len(pending), step):
        chunk = tuple(pending[start:start + step])
        context = tuple((list(before) + list(pending[:start]))[-overlap:]) if overlap else ()
        yield Window(context=context, new=chunk)


#: A user message that states nothing about the user: thanks, a greeting or a farewell, whole.
#: Answers ("yes", "no", "ok", "sure", "好的") are not here: after "are you allergic to nuts?" or
#: "shall I deliver on Friday?" an answer is how the user adopts the question, a statement.
_ACK = re.compile(
    r"^\s*(thanks?( you)?( so much| a lot)?|thx|ty|great|cool|nice|"
    r"hi|hello|hey|bye|goodbye|see you|good (morning|afternoon|evening|night)|"
    r"谢谢(你)?|多谢|你好|再见)[\s!.,。！，~]*$", re.IGNORECASE)
#: First-person words: a message carrying one may say something about the user ("my order", "我").
_FIRST_PERSON = re.compile(r"\b(my|me|mine|myself|we|our|ours|us|i'm|i've|i'd|i'll|im)\b|我|咱", re.IGNORECASE)
#: "I" as the subject of an information question ("can I pay by card?", "how do I ...").
_QUESTION_I = re.compile(r"\b(can|could|do|does|did|should|may|might|will|would|am|shall)\s+i\b", re.IGNORECASE)


def contentless(text: str) -> bool:
    """A user message a memory record cannot rest on, by a cheap rule: an acknowledgement or a
    greeting, or an information question about something other than the user (it ends with a
    question mark and has no first-person word besides an asking "can I" / "do I"). A request is
    never contentless: "could you add flour to my order?" has "my"."""
    t = text.strip()
    if not t or _ACK.match(t):
        return True
    if not t.endswith(("?", "？")):
        return False
    rest = _QUESTION_I.sub(" ", t)
    return not _FIRST_PERSON.search(rest) and not re.search(r"\bi\b", rest, re.IGNORECASE)


#: An information question a memory answers: it asks what, when, where, how ... or "do I / is my ...".
_RECALL_START = re.compile(r"^\s*(what|which|when|where|who|whose|how|why|do|did|does|have|has|is|are|was|were)\b",
                           re.IGNORECASE)
#: A request ("could you ...", "please ...") asks for something to be done: always a statement.
_REQUEST = re.compile(r"\b(could|can|would|will)\s+you\b|\bplease\b", re.IGNORECASE)
#: The thing a question says the user owns: the word after "my" / "our" (past an adjective).
_OWNED = re.compile(r"\b(?:my|our)\s+(?:(?:own|new|old|last|next|first|current|usual|favou?rite|previous|recent|"
                    r"latest)\s+)?([a-z][\w-]*)", re.IGNORECASE)
#: What every user has, so owning one is no news: "how do I update my email preferences?"
UNIVERSAL_OWNED = frozenset({"name", "age", "birthday", "email", "e-mail", "phone", "address", "account", "password",
                             "username", "login", "profile", "settings", "preferences"})
#: A value a question may carry (a number, an address, a name past the first word): "when does my
#: order 4411 arrive?" may tell memory the order number, so such a question is never skipped.
_VALUE = re.compile(r"\d|@|(?<=\s)(?!I\b)[A-Z]")
#: A Chinese information question: a question word or a final question particle.
_ZH_QUESTION = re.compile(r"什么|哪|谁|几|多少|怎么|怎样|为什么|何时|[吗呢][?？]?$")
#: Chinese first person other than "我" as the asker: "我的" (my: may be news), "我们" (we).
_ZH_NOT_ASKER = re.compile(r"我的|我们|咱")
#: First-person words other than the owner's "my" / "our".
_OTHER_FIRST_PERSON = re.compile(r"\b(i|me|mine|myself|we|ours|us|i'm|i've|i'd|i'll|im)\b|我|咱", re.IGNORECASE)


def recall_question(text: str, known: Callable[[str], bool]) -> bool:
    """A question that only asks about things memory already holds: "when does my order arrive?"
    when the user's records already mention an order. The user appears only as the asker ("do I")
    or as the owner ("my", "our"), and every owned thing must be `known` (a word of the user's
    records, current or not): "what do I need for my dog?" with no dog on record is news (the user
    has a dog) and reaches the extractor. Requests never count ("could you add flour to my order?")."""
    t = text.strip()
    if not t.endswith(("?", "？")) or _REQUEST.search(t) or _VALUE.search(t):
        return False
    if "我" in t:
        return _zh_asker_question(t)
    if not _RECALL_START.match(t):
        return False
    rest = _QUESTION_I.sub(" ", t)
    if _OTHER_FIRST_PERSON.search(rest):
        return False
    owned = _OWNED.findall(rest)
    return bool(owned) and all(w.lower() in UNIVERSAL_OWNED or known(w.lower()) for w in dict.fromkeys(owned))


def _zh_asker_question(t: str) -> bool:
    """A one-clause Chinese question with the user only as its subject, "我" (not "我的", "我们"):
    "我对什么过敏?" (what am I allergic to?) asks memory as "what am I allergic to?" does; a second
    clause ("我明天去北京，那边天气怎么样?") may state something, and "我的" may own something new."""
    body = t.rstrip("?？")
    return (bool(_ZH_QUESTION.search(t)) and t.count("我") == 1 and not _ZH_NOT_ASKER.search(t)
            and not any(c in body for c in "，,。；;！!"))


def says_nothing(new: Sequence[Message], known: Callable[[str], bool] | None = None) -> bool:
    """Whether a window's new messages can yield no record: no user message states anything
    (the assistant's words become records only when the user adopts them, which is a statement).
    With `known` (is this word in the user's records?), a question about things memory already
    holds states nothing either (`recall_question`)."""
    return all(m.role != "user" or contentless(m.content) or (known is not None and recall_question(m.content, known))
               for m in new)


def profile_name(profile: UserProfile) -> str | None:
    """The user's name as the profile knows it (its `name` field), if any."""
    values = profile.fields.get("name") or ()
    return values[-1] if values else None


def window_message(m: Message, name: str | None = None) -> WindowMessage:
    """A message as the extractor sees it; the user's own messages carry the user's known name."""
    speaker = m.name or (name if m.role == "user" and name else m.role)
    return WindowMessage(id=m.id or 0, role=m.role, speaker=speaker, content=m.content, at=m.created_at)


def to_records(out: ExtractionOutput, chunk: Sequence[Message], *, user_id: str, session_id: str,
               now: datetime) -> list[MemoryRecord]:
    """The extractor's proposals as records grounded in `chunk` (empty contents are dropped).

    A record is said when its earliest source message was said; it is created (extracted) `now`,
    and nothing has reinforced it yet: its decay runs from when it was said.
    """
    by_id = {m.id: m for m in chunk}
    recs: list[MemoryRecord] = []
    for x in out.records:
        if not x.content.strip():
            continue
        ids = tuple(i for i in x.source_ids if i in by_id) or (chunk[-1].id,)
        src_time = min(by_id[i].created_at for i in ids)
        span = None
        if x.time:
            try:
                span = parse_time_label(x.time, src_time.tzinfo)
            except (ValueError, MemlabError):
                span = None
        speaker = x.speaker or window_message(by_id[ids[0]]).speaker
        recs.append(MemoryRecord(
            user_id=user_id, content=x.content.strip(), memory_type=x.memory_type,
            tags=tuple(dict.fromkeys(x.tags)) or ("fact",), theme=x.theme, time=span,
            location=x.location, reason=x.reason, purpose=x.purpose,
            keywords=tuple(dict.fromkeys(k for k in x.keywords if k.strip())),
            source=SourcePointer(session_id=session_id, message_ids=ids, speaker=speaker),
            created_at=now, said_at=src_time, valid_from=src_time, lasting=x.lasting,
        ))
    return recs


def call_extractor(ctx: EngineContext, inp: ExtractionInput, *, log_session: str, event_no: int | None,
                   purpose: str) -> ExtractionOutput:
    """Call the configured extractor (scripted or a model) and log what it saw and returned as an
    "extraction" event: every extractor call goes through here, so every one can become a training
    pair (`memlab export-extractions`). `purpose`: "event" (a memory event's window) or
    "live-window" (the contradiction guard reading pending messages)."""
    out: ExtractionOutput = ctx.call_role("extractor", ctx.models.extractor.extract, inp)
    entry = extraction_entry(ctx.models.extractor, inp, out, mode=ctx.models.mode)
    ctx.log(inp.user_id, log_session, "extraction", {**entry, "purpose": purpose}, event_no=event_no)
    return out


def extraction_entry(extractor: Any, inp: ExtractionInput, out: ExtractionOutput, *, mode: str) -> dict[str, Any]:
    """What the extractor saw and returned, for the "extraction" event (training pairs).

    `input` is the window as a model extractor gets it (`ExtractionInput.payload`, the same for the
    scripted and the real roles), `output` the records it returned; `extractor` names the role's
    class and `model` its model (`mode`, e.g. "scripted", when the role has no model settings).
    """
    settings = getattr(extractor, "settings", None)
    return {"session": inp.session_id, "extractor": type(extractor).__name__,
            "model": getattr(settings, "model", None) or mode,
            "input": inp.payload(), "output": out.dump()}
