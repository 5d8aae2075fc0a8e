"""The extractor's compact payload, the responder reading it back, and which supersedes correct the profile."""

from datetime import UTC, datetime

from engine.core.records import UserProfile
from engine.memory.profile import profile_corrections
from engine.roles.llm.roles import LLMExtractor
from engine.roles.types import ExtractionInput, WindowMessage

T = datetime(2026, 3, 7, 10, 15, 42, tzinfo=UTC)


def test_extractor_payload_sends_speaker_only_when_it_is_not_the_role_and_minute_times():
    inp = ExtractionInput(user_id="u", session_id="s", new=[
        WindowMessage(id=1, role="user", speaker="user", content="I moved.", at=T),
        WindowMessage(id=2, role="user", speaker="Carol", content="I bake.", at=T),
        WindowMessage(id=3, role="assistant", speaker="assistant", content="Noted.", at=T)])
    out = LLMExtractor.__new__(LLMExtractor)._payload(inp)["new"]
    assert out == inp.payload()["new"]  # the export's pairs and the event log get the same
    assert [("speaker" in m) for m in out] == [False, True, False]
    assert out[1]["speaker"] == "Carol" and out[0]["at"] == "2026-03-07T10:15+00:00"
    back = [WindowMessage(**m) for m in out]  # the scripted responder and the export read it back
    assert [m.speaker for m in back] == ["user", "Carol", "assistant"]
    assert back[0].at == T.replace(second=0)


def test_only_a_supersede_of_a_record_the_profile_rests_on_is_a_correction():
    profile = UserProfile(user_id="u", fields={"identity": ("lives in Beijing",)},
                          sources={"identity": {"lives in Beijing": (4,)}})
    superseded = [{"existing": 4, "successor": 9}, {"existing": 2, "successor": 10}]
    assert profile_corrections(profile, superseded) == [9]
    assert profile_corrections(UserProfile(user_id="u"), superseded) == []


def test_a_record_the_profile_already_says_is_not_shown_twice():
    from engine.core.records import MemoryRecord
    from engine.core.tokens import ApproxTokenCounter
    from engine.memory.injection import build_prompt, said_by_profile

    name = MemoryRecord(id=1, user_id="u", content="The user's name is Omar Haddad.", created_at=T)
    job = MemoryRecord(id=2, user_id="u", content="Omar Haddad manages a climbing gym in Leeds.", created_at=T)
    profile = UserProfile(user_id="u", fields={"name": ("Omar Haddad",), "occupation": ("manager",)},
                          sources={"name": {"Omar Haddad": (1,)}, "occupation": {"manager": (2,)}})
    assert said_by_profile(name, profile) and not said_by_profile(job, profile)
    p = build_prompt(core="core", profile=profile, records=[name, job], window=[], counter=ApproxTokenCounter())
    assert "climbing gym" in p.system and "The user's name is" not in p.system and p.record_ids == (1, 2)
    unsourced = UserProfile(user_id="u", fields=profile.fields)
    assert not said_by_profile(name, unsourced)  # only a value resting on the record stands in for it
