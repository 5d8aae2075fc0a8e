"""The five memory roles on a chat model: their static prompts and their role-specific repairs.

Each prompt is one static system message (identical across calls, so provider prompt caches hit);
the variable input goes as one compact JSON user message, with no conversation history.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from engine.core.records import MEMORY_TYPES, PROFILE_FIELDS, TAGS
from engine.roles.llm.base import LLMRole, Retryable
from engine.roles.llm.repairs import as_str_list, validation_summary
from engine.roles.types import (
    ConsolidationDecision,
    ConsolidationInput,
    ExtractionInput,
    ExtractionOutput,
    InductionInput,
    InductionOutput,
    ParsedQuery,
    QueryInput,
    TimeConstraint,
    TuneInput,
    TuneOutput,
)

__all__ = ["LLMExtractor", "LLMQueryParser", "LLMConsolidator", "LLMTuner", "LLMProfileInducer"]

_EXTRACT = """Extract long-term memory records from a user-assistant chat.
Input JSON {"context", "new"}: messages with id, role, speaker (absent: the role itself), at (ISO time), content. Record only what the `new` messages say; `context` only resolves references.
- One atomic, self-contained statement per record: the speaker's name (or "the user") for pronouns, absolute dates for relative ones ("yesterday", "next Friday"), computed from that message's `at`.
- User-side facts only: what the user said, is, did, plans, prefers or decided; the assistant's suggestions only if the user adopts them; no greetings or small talk. Life events (a death, a diagnosis, a move, a wedding, a job loss) and open problems (a refund not yet arrived) are never small talk. Someone else's preferences are theirs, not the user's.
- A request, even as a question ("could you add two bags of flour to my next order?"), is a record; a question asking for information is not.
- memory_type: profile (lasting traits: identity, job, stable preferences), episodic (an event at a time), else fact.
- tags: "safety" marks allergies, intolerances, medical conditions and medications, legal constraints and accessibility needs; add a keyword naming the class ("allergy", "medical", "legal", "accessibility").
- lasting: false only for a one-off instruction that applies once ("only this time", "just for this order", "这次先"); standing instructions ("always ship to my office") are lasting.
- time (YYYY-MM-DD, YYYY-MM, YYYY or START..END), location, reason, purpose: only where stated. theme: a short topic. keywords: 2-6 salient words. source_ids: the `new` ids it rests on. speaker: who it is about.
- Write in the messages' language; an empty list when nothing is worth remembering.
- profile (only when the input has "profile", the user's profile {field: [values]}): {add, remove} per field, what your records change in it: short values they establish and it lacks, values they show are no longer true; name holds one value (a new name replaces the old); {} when nothing changes.
Answer only by calling the tool."""

_QUERY = """You parse a question put to a memory store into search dimensions.
Input JSON: {"text", "now" (ISO time), "speaker"}.
- text: the question unchanged. anchor: its core subject in a few words. keywords: 2-6 salient search words, no stopwords.
- target_types: record types that would answer it (fact, episodic, profile); empty when unsure.
- time: only when the question constrains time. op: on, before, after, around or between; start and end: absolute ISO datetimes with a UTC offset, resolved against `now`; granularity: instant, day, month, year or range; text: the time expression.
- location: a place the question is restricted to. needs_assistant: true when it asks what the assistant said.
- answer_dimension: what the answer is: time, location, reason, purpose or content.
Answer only by calling the tool."""

_CONSOLIDATE = """You decide how a new memory record relates to an existing record on the same subject.
Input JSON: {"new", "existing", "cosine"} (cosine: their embedding similarity).
- MERGE: they say the same thing or complete each other; merged_content: one self-contained record holding both.
- SUPERSEDE: the new record updates or contradicts the existing one (a changed preference, plan or fact).
- KEEP_BOTH: they are about different things.
reason: one short sentence. Answer only by calling the tool."""

_TUNE = """You tune memory-scoring weights for one conversation theme.
A memory's score is S = alpha*R + beta*T + gamma*F + delta, where R is relevance to the query, T is recency (forgetting-curve decay), F is importance, delta a bias in [-1, 1].
Importance is F = w0 + w1*u + w2*(1 - exp(-k*n)), u the salience of the memory's type, n how often it was reinforced.
alpha+beta+gamma must equal 1 and w0+w1+w2 must equal 1, each in [0, 1].
Input JSON: {"theme", "samples" (recent messages on it), "current" (current weights)}.
Favour relevance for lookups, recency for fast-changing topics, importance for identity and commitments; stay near `current` unless the samples call for a change. rationale: one short sentence.
Answer only by calling the tool."""

_INDUCE = """You maintain a user's long-term profile from their memory records.
Input JSON {"profile": {field: [values]}, "records": [...]}. Fields: %s.
- add: per field, short values (a few words, in the records' language) the records establish and the profile lacks; nothing uncertain.
- remove: per field, existing values the records show are no longer true.
- name: the user's own name, one value only; a different name in the records replaces the profile's (add it, remove the old).
Answer only by calling the tool.""" % ", ".join(PROFILE_FIELDS)


class LLMExtractor(LLMRole[ExtractionInput, ExtractionOutput]):
    """Records from a window; source ids outside the new messages and unknown tags are repaired."""

    role = "extractor"
    output_model = ExtractionOutput
    instructions = _EXTRACT
    schema_descriptions = False  # the prompt explains every field

    def _payload(self, inp: ExtractionInput) -> dict[str, Any]:
        return inp.payload()

    def extract(self, inp: ExtractionInput) -> ExtractionOutput:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: ExtractionInput, notes: list[str]) -> dict[str, Any]:
        records = data.get("records", [])
        if not isinstance(records, list):
            raise Retryable(f"records is a {type(records).__name__}, not a list", kind="output")
        new_ids = [m.id for m in inp.new]
        kept = []
        for i, rec in enumerate(records):
            if not isinstance(rec, dict) or not str(rec.get("content") or "").strip():
                notes.append(f"records[{i}] dropped: no content")
                continue
            rec = dict(rec)
            if rec.get("memory_type", "fact") not in MEMORY_TYPES:
                notes.append(f"records[{i}].memory_type {rec['memory_type']!r} is unknown; set to 'fact'")
                rec["memory_type"] = "fact"
            if "tags" in rec:
                tags = as_str_list(rec["tags"])
                good = [t for t in tags if t in TAGS]
                if len(good) != len(tags):
                    notes.append(f"records[{i}].tags dropped {[t for t in tags if t not in TAGS]}")
                rec["tags"] = list(dict.fromkeys(good)) or ["fact"]
            if "keywords" in rec:
                rec["keywords"] = as_str_list(rec["keywords"])
            ids = []
            for x in rec.get("source_ids") or []:
                try:
                    ids.append(int(x))
                except (TypeError, ValueError):
                    ids.append(None)
            valid = [x for x in ids if x in new_ids]
            if not valid:
                valid = list(new_ids)
            if valid != ids:
                notes.append(f"records[{i}].source_ids {rec.get('source_ids')} not among new ids {new_ids}; set to {valid}")
            rec["source_ids"] = list(dict.fromkeys(valid))
            for key in ("time", "location", "reason", "purpose"):
                if key in rec and rec[key] is not None and not isinstance(rec[key], str):
                    rec[key] = str(rec[key])
            kept.append(rec)
        out = {**data, "records": kept}
        if inp.profile is None:
            out.pop("profile", None)  # not asked: whatever came is not an answer
        elif isinstance(out.get("profile"), dict):
            out["profile"] = repaired_changes(out["profile"], notes, where="profile.")
        elif out.get("profile") is not None:
            notes.append(f"profile was a {type(out['profile']).__name__}, not an object; dropped")
            out["profile"] = None
        return out

    def _finish(self, out: ExtractionOutput, inp: ExtractionInput, notes: list[str]) -> ExtractionOutput:
        if out.profile is None or inp.profile is None:
            return out
        return out.model_copy(update={"profile": one_name(out.profile, inp.profile, notes)})


class LLMQueryParser(LLMRole[QueryInput, ParsedQuery]):
    """A question into dimensions; a bad time constraint is dropped, naive times get `now`'s zone."""

    role = "query_parser"
    output_model = ParsedQuery
    instructions = _QUERY
    _DIMENSIONS = ("time", "location", "reason", "purpose", "content")

    def parse(self, inp: QueryInput) -> ParsedQuery:
        return self.run(inp).output

    def _payload(self, inp: QueryInput) -> dict[str, Any]:
        return {"text": inp.text, "now": inp.now.isoformat(), "speaker": inp.speaker}

    def _prepare(self, data: dict[str, Any], inp: QueryInput, notes: list[str]) -> dict[str, Any]:
        data = dict(data)
        if data.get("text") != inp.text:
            if data.get("text"):
                notes.append("text rewritten by the model; restored the question")
            data["text"] = inp.text
        if "keywords" in data:
            data["keywords"] = as_str_list(data["keywords"])
        if "target_types" in data:
            types = as_str_list(data["target_types"])
            good = [t for t in types if t in MEMORY_TYPES]
            if len(good) != len(types):
                notes.append(f"target_types dropped {[t for t in types if t not in MEMORY_TYPES]}")
            data["target_types"] = list(dict.fromkeys(good))
        if data.get("answer_dimension") not in (None, *self._DIMENSIONS):
            notes.append(f"answer_dimension {data['answer_dimension']!r} is unknown; dropped")
            data["answer_dimension"] = None
        if data.get("time") is not None:
            try:
                tc = TimeConstraint.model_validate(data["time"])
            except ValidationError as exc:
                notes.append(f"time constraint dropped: {validation_summary(exc)}")
                data["time"] = None
            else:
                tz = inp.now.tzinfo
                start = tc.start if tc.start.tzinfo else tc.start.replace(tzinfo=tz)
                end = tc.end if tc.end.tzinfo else tc.end.replace(tzinfo=tz)
                if (start, end) != (tc.start, tc.end):
                    notes.append("time constraint had no UTC offset; used the one of `now`")
                if end < start:
                    notes.append("time constraint start after end; swapped")
                    start, end = end, start
                data["time"] = tc.model_copy(update={"start": start, "end": end})
        return data


class LLMConsolidator(LLMRole[ConsolidationInput, ConsolidationDecision]):
    """MERGE / SUPERSEDE / KEEP_BOTH; a spelling variant of the action is normalised."""

    role = "consolidator"
    output_model = ConsolidationDecision
    instructions = _CONSOLIDATE

    def decide(self, inp: ConsolidationInput) -> ConsolidationDecision:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: ConsolidationInput, notes: list[str]) -> dict[str, Any]:
        action = data.get("action")
        if isinstance(action, str):
            norm = action.strip().upper().replace("-", "_").replace(" ", "_")
            if norm != action and norm in ("MERGE", "SUPERSEDE", "KEEP_BOTH"):
                notes.append(f"action {action!r} normalised to {norm!r}")
                data = {**data, "action": norm}
        return data

    def _finish(self, out: ConsolidationDecision, inp: ConsolidationInput, notes: list[str]) -> ConsolidationDecision:
        if out.action == "MERGE" and not (out.merged_content or "").strip():
            raise Retryable("MERGE without merged_content", kind="output")
        return out


class LLMTuner(LLMRole[TuneInput, TuneOutput]):
    """Weights for a theme, validated against the schema (types, missing fields: ask again).

    Weights off their ranges or sums are not repaired here: the engine's tune step repairs them
    once (engine.core.config.repair_weights) and logs the repairs in its event.
    """

    role = "tuner"
    output_model = TuneOutput
    instructions = _TUNE

    def tune(self, inp: TuneInput) -> TuneOutput:
        return self.run(inp).output


class LLMProfileInducer(LLMRole[InductionInput, InductionOutput]):
    """Profile additions and removals; bare strings become one-value lists; `name` holds one value."""

    role = "inducer"
    output_model = InductionOutput
    instructions = _INDUCE
    #: What a profile value needs of a record; keywords and theme are retrieval's, and every record
    #: the engine sends is lasting.
    _RECORD_KEYS = ("content", "memory_type", "tags", "time", "location", "reason", "purpose")

    def _payload(self, inp: InductionInput) -> dict[str, Any]:
        return {"profile": inp.profile,
                "records": [r.model_dump(mode="json", include=set(self._RECORD_KEYS), exclude_none=True)
                            for r in inp.records]}

    def induct(self, inp: InductionInput) -> InductionOutput:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: InductionInput, notes: list[str]) -> dict[str, Any]:
        return repaired_changes(data, notes)

    def _finish(self, out: InductionOutput, inp: InductionInput, notes: list[str]) -> InductionOutput:
        return one_name(out, inp.profile, notes)


def repaired_changes(data: dict[str, Any], notes: list[str], where: str = "") -> dict[str, Any]:
    """Profile changes ({add, remove}) as the schema wants them: bare strings become one-value
    lists, a part that is not an object is dropped (each repair noted)."""
    data = dict(data)
    for part in ("add", "remove"):
        value = data.get(part)
        if value is None:
            continue
        if not isinstance(value, dict):
            notes.append(f"{where}{part} was a {type(value).__name__}, not an object; dropped")
            data[part] = {}
            continue
        fixed = {}
        for k, v in value.items():
            vals = as_str_list(v)
            if not isinstance(v, list):
                notes.append(f"{where}{part}.{k} was not a list; wrapped")
            if vals:
                fixed[str(k)] = vals
        data[part] = fixed
    return data


def one_name(out: InductionOutput, profile: dict[str, list[str]], notes: list[str]) -> InductionOutput:
    """A new name replaces the old: one added name at most, and the profile's others removed."""
    added = out.add.get("name") or []
    if not added:
        return out
    add, remove = dict(out.add), dict(out.remove)
    if len(added) > 1:
        notes.append(f"name is single-valued; kept the last of {added}")
        add["name"] = [added[-1]]
    stale = [v for v in profile.get("name", []) if v != add["name"][0] and v not in remove.get("name", [])]
    if stale:
        notes.append(f"name {add['name'][0]!r} replaces {stale}; removed them")
        remove["name"] = [*remove.get("name", []), *stale]
    return out.model_copy(update={"add": add, "remove": remove})
