"""Updates pair by subject and attribute, whatever the type (issue 13): the scripted extractor
states single-valued attributes canonically with the attribute among the keywords, the scripted
consolidator supersedes a changed value and merges a restated one regardless of memory_type, and
the scripted inducer keeps other people's attributes and one-off instructions out of the profile."""

from datetime import datetime, timedelta, timezone

import pytest

from engine.core.attributes import stated_attribute
from engine.core.config import MemoryConfig
from engine.core.text import jaccard
from engine.roles import types as R
from engine.roles.scripted import (
    ScriptedConsolidator,
    ScriptedExtractor,
    ScriptedProfileInducer,
)

AT = datetime(2023, 5, 8, 15, 0, tzinfo=timezone(timedelta(hours=8)))
BLOCKING = MemoryConfig().update_jaccard


def record(text, speaker="user"):
    msg = R.WindowMessage(id=1, role="user", speaker=speaker, content=text, at=AT)
    records = ScriptedExtractor().extract(R.ExtractionInput(user_id="u", session_id="s", new=[msg])).records
    assert records, text
    return records[-1]


def view(rec, memory_type=None):
    return R.RecordView(content=rec.content, memory_type=memory_type or rec.memory_type, tags=list(rec.tags),
                        time=rec.time, keywords=list(rec.keywords), lasting=rec.lasting)


def decide(old, new, *, old_type=None, new_type=None):
    inp = R.ConsolidationInput(new=view(new, new_type), existing=view(old, old_type), cosine=0.8)
    return ScriptedConsolidator().decide(inp)


CHANGES = [
    ("I live in Lisbon.", "I just moved to Porto.", "residence"),
    ("I live in Lisbon.", "I moved to Porto last month.", "residence"),
    ("My phone number is 555-0101.", "My new phone number is 555-9999.", "phone"),
    ("My phone number is 555-0101.", "My phone number changed to 555-9999.", "phone"),
    ("My email is ana@mail.example.", "My email is now ana.silva@work.example.", "email"),
    ("I work at Google.", "I work at Acme now.", "employer"),
    ("The detective is called Tomás.", "The detective is now called Inês.", "name:detective"),
    ("The detective is called Tomás.", "Let's rename the detective to Inês.", "name:detective"),
    ("My cat is called Pepper.", "My cat is now called Salt.", "name:cat"),
    ("我住在北京。", "我搬到上海了。", "residence"),
    ("我的手机号是13800001111。", "我的新手机号是13922223333。", "phone"),
    ("我的猫叫咪咪。", "我的猫现在叫花花。", "name:猫"),
    ("侦探叫托马斯。", "侦探现在叫伊内斯。", "name:侦探"),
]


@pytest.mark.parametrize(("old_text", "new_text", "attribute"), CHANGES)
def test_a_changed_value_reads_as_the_same_attribute_and_blocks_together(old_text, new_text, attribute):
    old, new = record(old_text), record(new_text)
    a, b = stated_attribute(old.content), stated_attribute(new.content)
    assert a is not None and b is not None and a.name == b.name == attribute and a.subject == b.subject
    assert a.value != b.value
    assert attribute.split(":")[0] in old.keywords and attribute.split(":")[0] in new.keywords
    assert jaccard(old.keywords, new.keywords) >= BLOCKING  # the update step's keyword blocking pairs them
    assert old.memory_type == new.memory_type  # the extractor types both the same way


@pytest.mark.parametrize(("old_text", "new_text", "attribute"), CHANGES)
@pytest.mark.parametrize(("old_type", "new_type"), [(None, None), ("profile", "fact"), ("fact", "profile"),
                                                    ("profile", "episodic"), ("episodic", "fact")])
def test_a_changed_value_supersedes_whatever_the_types(old_text, new_text, attribute, old_type, new_type):
    decision = decide(record(old_text), record(new_text), old_type=old_type, new_type=new_type)
    assert decision.action == "SUPERSEDE" and attribute in decision.reason


@pytest.mark.parametrize(
    ("old_text", "new_text"),
    [("I live in Lisbon.", "I live in Lisbon, near the river."), ("My phone number is 555-0101.", "My phone number is 555-0101."),
     ("The detective is called Tomás.", "The detective is still called Tomás."), ("我住在北京。", "我住在北京朝阳区。")],
)
@pytest.mark.parametrize(("old_type", "new_type"), [(None, None), ("profile", "fact"), ("fact", "episodic")])
def test_the_same_value_restated_merges_whatever_the_types(old_text, new_text, old_type, new_type):
    assert decide(record(old_text), record(new_text), old_type=old_type, new_type=new_type).action == "MERGE"


@pytest.mark.parametrize(
    ("old_text", "new_text"),
    [("I live in Lisbon.", "My sister Ana lives in Porto."),  # someone else's city
     ("I'm from Lisbon.", "I live in Porto."),  # where one is from is not where one lives
     ("My phone number is 555-0101.", "My sister's phone number is 555-9999."),
     ("My cat is called Pepper.", "My dog is called Rex."),  # two pets, two names
     ("我住在北京。", "我妹妹安娜住在上海。")],
)
def test_different_attributes_or_subjects_keep_both(old_text, new_text):
    assert decide(record(old_text), record(new_text)).action == "KEEP_BOTH"


def test_a_pronoun_resolved_attribute_belongs_to_the_person_not_the_user():
    msgs = [R.WindowMessage(id=i, role="user", speaker="user", content=t, at=AT)
            for i, t in enumerate(["I live in Lisbon.", "My sister Ana is a nurse. She lives in Porto."], start=1)]
    records = ScriptedExtractor().extract(R.ExtractionInput(user_id="u", session_id="s", new=msgs)).records
    mine, hers = records[0], next(r for r in records if r.content == "Ana lives in Porto.")
    assert stated_attribute(hers.content).subject == "ana"
    assert decide(mine, hers).action == "KEEP_BOTH"


# ---------------------------------------------------------------- the inducer


def induct(records, profile=None):
    return ScriptedProfileInducer().induct(R.InductionInput(profile=profile or {}, records=records))


def test_the_inducer_replaces_single_valued_identity_attributes():
    out = induct([view(record("My new phone number is 139-2222-3333."))],
                 profile={"identity": ["phone: 138-0000-1111", "lives in Beijing"]})
    assert out.add == {"identity": ["phone: 139-2222-3333"]} and out.remove == {"identity": ["phone: 138-0000-1111"]}
    origin = induct([view(record("I'm from Lisbon."))], profile={"identity": ["lives in Porto"]})
    assert origin.add == {"identity": ["from Lisbon"]} and origin.remove == {}  # a hometown does not move the user


def test_the_inducer_keeps_other_peoples_attributes_and_preferences_out():
    records = [view(record(t)) for t in ["My sister Ana is a nurse.", "My neighbour loves dogs.",
                                         "My neighbour's dog Rex barks all night.", "My sister hates cilantro."]]
    records.append(R.RecordView(content="Ana lives in Porto.", memory_type="fact", tags=["fact"]))
    out = induct(records, profile={"occupation": ["teacher"], "identity": ["lives in Lisbon"]})
    assert "occupation" not in out.add and "identity" not in out.add and "preferences" not in out.add
    assert out.remove == {}
    assert "dog: Rex" not in out.add.get("relationships", [])


def test_the_inducer_keeps_one_off_instructions_out_and_durable_ones_in():
    once = view(record("Ship this one to my office, only this time."))
    always = view(record("Always ship to my office."))
    assert once.lasting is False and always.lasting is True
    out = induct([once, always])
    assert out.add == {"preferences": ["The user asked to always ship to the user's office."]}


def test_the_inducer_files_safety_constraints_as_constraints():
    out = induct([view(record("I use a wheelchair.")), view(record("我对花生过敏。"))])
    assert out.add["constraints"] == ["The user uses a wheelchair.", "用户对花生过敏。"]
