"""The scripted (offline, rule-based) model roles and the scripted chat model."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from engine.core.records import PROFILE_FIELDS
from engine.roles import types as R
from engine.roles.scripted import (
    THEMES,
    ScriptedChatModel,
    ScriptedConsolidator,
    ScriptedExtractor,
    ScriptedProfileInducer,
    ScriptedQueryParser,
    ScriptedTuner,
    scripted_roles,
)

TZ = timezone(timedelta(hours=8))
AT = datetime(2023, 5, 8, 15, 0, tzinfo=TZ)  # a Monday


def msg(i, role, speaker, content, at=AT):
    return R.WindowMessage(id=i, role=role, speaker=speaker, content=content, at=at)


def extract(*messages, context=()):
    out = ScriptedExtractor().extract(R.ExtractionInput(user_id="u", session_id="s", context=list(context), new=list(messages)))
    return out.records


def find(records, needle):
    hits = [r for r in records if needle in r.content]
    assert hits, f"no record mentions {needle!r}: {[r.content for r in records]}"
    return hits[0]


@pytest.fixture(scope="module")
def english():
    return extract(
        msg(1, "user", "Caroline", "Hi! I went to an LGBTQ support group yesterday because I wanted to meet people. "
            "I love painting, and my dog is called Max."),
        msg(2, "assistant", "assistant", "That's great! You should visit Paris next month."),
        msg(3, "user", "Caroline", "I'm a counselor at a school in Boston. My order number is #A-77812 and my card ends in 4821."),
        msg(4, "user", "Caroline", "I decided to move to Seattle next year to be closer to my family. What do you think?"),
    )  # fmt: skip


def test_english_episode_with_resolved_speaker_time_and_reason(english):
    rec = find(english, "support group")
    assert rec.content.startswith("Caroline went to an LGBTQ support group on 2023-05-07")
    assert "I " not in rec.content and "yesterday" not in rec.content
    assert rec.memory_type == "episodic" and "episode" in rec.tags
    assert rec.time == "2023-05-07"
    assert rec.reason and rec.reason.startswith("Caroline wanted to meet people")
    assert rec.source_ids == [1] and rec.speaker == "Caroline"
    assert {"caroline", "lgbtq", "support", "group"} <= set(rec.keywords)
    assert len(rec.keywords) <= 8


def test_english_preference_identity_and_needles(english):
    pref = find(english, "painting")
    assert pref.content == "Caroline loves painting." and pref.memory_type == "profile"
    assert pref.tags == ["preference"] and pref.theme == "hobbies"
    dog = find(english, "Max")
    assert dog.content == "Caroline's dog is called Max." and dog.theme == "pets"
    job = find(english, "counselor")
    assert "identity" in job.tags and job.location == "Boston" and job.theme == "work"
    # atomic records: the order number and the card tail are two facts, both kept verbatim
    assert "#A-77812" in find(english, "77812").content
    assert "4821" in find(english, "4821").content
    assert "4821" in find(english, "4821").keywords


def test_english_decision_with_purpose_and_absolute_year(english):
    rec = find(english, "Seattle")
    assert "decision" in rec.tags
    assert rec.content == "Caroline decided to move to Seattle in 2024 to be closer to Caroline's family."
    assert rec.time == "2024" and rec.location == "Seattle"


def test_assistant_messages_and_chitchat_are_not_extracted(english):
    assert all(r.source_ids != [2] for r in english)
    assert not any("Paris" in r.content for r in english)
    assert not any("think" in r.content for r in english)  # the question is skipped
    assert not any(r.content.startswith("Caroline said: Hi") for r in english)
    assert extract(msg(1, "user", "Caroline", "Thanks! Sounds good. How are you?")) == []


def test_context_is_context_only_and_self_introduction_names_the_user():
    records = extract(
        msg(2, "user", "user", "I work as a data analyst. I can't do meetings on Friday."),
        context=[msg(1, "user", "user", "Hello, I'm Li Mingxuan.")],
    )
    assert [r.source_ids for r in records] == [[2], [2]]
    job = find(records, "data analyst")
    assert job.content == "Li Mingxuan works as a data analyst." and "identity" in job.tags
    busy = find(records, "Friday")
    assert busy.content == "Li Mingxuan can't do meetings on Friday." and busy.theme == "schedule"


def test_anonymous_user_is_the_user():
    records = extract(msg(1, "user", "user", "My favourite colour is blue."))
    assert records[0].content == "The user's favourite colour is blue."
    assert records[0].tags == ["preference"]


def test_chinese_conversation():
    records = extract(
        msg(1, "user", "user", "我叫李明轩，我是数据分析师。我住在北京朝阳区。上周五我去上海出差了，为了见客户。"
            "我喜欢吃火锅，但是我对花生过敏。我的猫叫咪咪。"),
        msg(2, "assistant", "assistant", "好的，推荐你去杭州。"),
    )  # fmt: skip
    assert not any("杭州" in r.content for r in records)
    name = find(records, "名字")
    # not the tautology "李明轩的名字是李明轩" (issue 13): the user's name is 李明轩
    assert name.content == "用户的名字是李明轩。" and name.tags == ["identity"] and name.memory_type == "profile"
    home = find(records, "北京")
    assert home.content == "李明轩住在北京朝阳区。" and "identity" in home.tags and home.location == "北京朝阳区"
    trip = find(records, "上海")
    assert trip.content.startswith("2023年5月5日李明轩去上海出差")
    assert trip.time == "2023-05-05" and trip.memory_type == "episodic"
    assert trip.location == "上海" and trip.purpose == "见客户" and trip.theme == "travel"
    food = find(records, "火锅")
    assert food.tags == ["preference"] and food.theme == "food"
    allergy = find(records, "花生")
    assert allergy.content == "李明轩对花生过敏。" and "fact" in allergy.tags
    assert find(records, "咪咪").theme == "pets"
    assert all("我" not in r.content for r in records)


def test_chinese_reason():
    rec = extract(msg(1, "user", "王芳", "因为工作忙，我昨天没去健身房。"))[0]
    assert rec.reason == "工作忙" and rec.time == "2023-05-07"


# ---------------------------------------------------------------- query parser


def parse(text, now=AT):
    return ScriptedQueryParser().parse(R.QueryInput(text=text, now=now))


def test_query_when_question():
    q = parse("When did Caroline go to the support group?")
    assert q.answer_dimension == "time" and q.target_types == ["episodic"]
    assert q.keywords == ["caroline", "support", "group"]
    assert "when" not in q.anchor.lower() and "support group" in q.anchor
    assert q.needs_assistant is False


def test_query_time_location_and_dimensions():
    q = parse("What did I do last weekend in Paris?")
    assert q.time is not None and q.time.op == "on" and q.time.text == "2023-05-06..2023-05-07"
    assert q.location == "Paris"
    assert parse("Why did Caroline move to Seattle?").answer_dimension == "reason"
    assert parse("Where does Caroline live?").answer_dimension == "location"
    assert parse("What did she buy the flowers for?").answer_dimension == "purpose"
    assert parse("What is my dog's name?").target_types == ["profile"]
    assert parse("我上周五在哪里出差？").time.text == "2023-05-05"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did you recommend last time?", True),
        ("You mentioned a book earlier, what was it?", True),
        ("你上次推荐的餐厅叫什么？", True),
        ("你说过的那家店在哪？", True),
        ("Can you recommend a restaurant?", False),
        ("What is my dog's name?", False),
    ],
)
def test_needs_assistant(text, expected):
    assert parse(text).needs_assistant is expected


# ---------------------------------------------------------------- consolidator


def view(content, memory_type="fact", tags=("fact",), time=None):
    return R.RecordView(content=content, memory_type=memory_type, tags=list(tags), time=time)


def decide(old, new, memory_type="fact", **kw):
    inp = R.ConsolidationInput(new=view(new, memory_type, **kw), existing=view(old, memory_type, **kw), cosine=0.8)
    return ScriptedConsolidator().decide(inp)


@pytest.mark.parametrize(
    ("old", "new", "memory_type", "action"),
    [
        ("Caroline lives in Beijing.", "Caroline moved to Shanghai.", "profile", "SUPERSEDE"),
        ("Caroline's favourite colour is blue.", "Caroline's favourite colour is green.", "profile", "SUPERSEDE"),
        ("Caroline's phone number is 138 0000 1111.", "Caroline's phone number is 139 2222 3333.", "fact", "SUPERSEDE"),
        ("Caroline's card ends in 4821.", "Caroline's card ends in 9900.", "fact", "SUPERSEDE"),
        ("Caroline lives in Beijing.", "Caroline lives in Beijing, in Chaoyang.", "profile", "MERGE"),
        ("Caroline lives in Beijing.", "Caroline lives in Beijing.", "fact", "MERGE"),
        ("Caroline loves painting.", "Caroline loves painting landscapes.", "profile", "MERGE"),
        ("Caroline loves painting.", "Caroline no longer loves painting.", "profile", "SUPERSEDE"),
        ("Caroline loves painting.", "Caroline hates painting.", "profile", "SUPERSEDE"),
        ("Caroline loves painting.", "Caroline loves hiking.", "profile", "KEEP_BOTH"),
        ("李明轩住在北京。", "李明轩搬到上海了。", "profile", "SUPERSEDE"),
        ("李明轩喜欢火锅。", "李明轩不再喜欢火锅。", "profile", "SUPERSEDE"),
        ("Caroline owns a red bike.", "Caroline's sister is a nurse.", "fact", "KEEP_BOTH"),
    ],
)
def test_consolidation_by_type(old, new, memory_type, action):
    decision = decide(old, new, memory_type)
    assert decision.action == action, decision.reason
    if action == "MERGE":
        assert decision.merged_content in (old, new)
        assert len(decision.merged_content) >= min(len(old), len(new))


def test_episodic_merges_only_the_same_event():
    same = decide(
        "Caroline went to an LGBTQ support group on 2023-05-07.",
        "Caroline went to the support group on 2023-05-07.",
        "episodic",
        time="2023-05-07",
    )
    assert same.action == "MERGE" and "LGBTQ" in same.merged_content
    inp = R.ConsolidationInput(
        new=view("Caroline went to the support group on 2023-05-14.", "episodic", time="2023-05-14"),
        existing=view("Caroline went to the support group on 2023-05-07.", "episodic", time="2023-05-07"),
        cosine=0.95,
    )
    assert ScriptedConsolidator().decide(inp).action == "KEEP_BOTH"


# ---------------------------------------------------------------- tuner


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(st.sampled_from([*THEMES, "profile", "relationships", "plans", ""]), st.text(max_size=20)),
    st.lists(st.sampled_from(["on 2023-05-07 x", "nothing dated", "2023年5月 y"]), max_size=5),
)
def test_tuner_output_is_always_valid(theme, samples):
    out = ScriptedTuner().tune(R.TuneInput(theme=theme, samples=samples))
    assert out.alpha + out.beta + out.gamma == pytest.approx(1.0)
    assert out.w0 + out.w1 + out.w2 == pytest.approx(1.0)
    assert min(out.alpha, out.beta, out.gamma) > 0
    assert 0.05 <= out.w0 <= 0.15 and 0.5 <= out.w1 <= 0.8 and 0.05 <= out.w2 <= 0.2
    assert -0.1 <= out.delta <= 0.2
    assert out == ScriptedTuner().tune(R.TuneInput(theme=theme, samples=samples))  # deterministic


def test_tuner_favours_by_theme():
    tuner = ScriptedTuner()
    identity = tuner.tune(R.TuneInput(theme="identity"))
    schedule = tuner.tune(R.TuneInput(theme="schedule"))
    topical = tuner.tune(R.TuneInput(theme="hobbies"))
    assert identity.gamma == max(identity.alpha, identity.beta, identity.gamma)
    assert schedule.beta == max(schedule.alpha, schedule.beta, schedule.gamma)
    assert topical.alpha == max(topical.alpha, topical.beta, topical.gamma)


# ---------------------------------------------------------------- inducer


def test_inducer_maps_fields_and_skips_paraphrases():
    inp = R.InductionInput(
        profile={"constraints": ["Li Mingxuan can't do meetings on Friday."], "occupation": ["teacher"]},
        records=[
            view("Li Mingxuan cannot do meetings on Fridays."),
            view("Li Mingxuan can't do any meetings on Friday."),
            view("Li Mingxuan works as a data analyst.", "profile", ("identity",)),
            view("Li Mingxuan's name is Li Mingxuan.", "profile", ("identity",)),
            view("Li Mingxuan's wife is called Anna.", "profile", ("identity",)),
            view("李明轩的猫叫咪咪。", "profile", ("identity",)),
            view("李明轩对花生过敏。"),
            view("Li Mingxuan loves hot pot.", "profile", ("preference",)),
            view("Li Mingxuan really loves hot pot.", "profile", ("preference",)),
            view("Li Mingxuan decided to learn Spanish.", "fact", ("decision",)),
            view("Li Mingxuan lives in Beijing.", "profile", ("identity",)),
        ],
    )
    out = ScriptedProfileInducer().induct(inp)
    assert set(out.add) <= set(PROFILE_FIELDS)
    assert out.add["constraints"] == ["李明轩对花生过敏。"]  # the Friday paraphrases are not added
    assert out.add["occupation"] == ["data analyst"] and out.remove == {"occupation": ["teacher"]}
    assert out.add["name"] == ["Li Mingxuan"]  # the schema's name field, not "name: " inside identity
    assert out.add["identity"] == ["lives in Beijing"]
    assert out.add["relationships"] == ["wife: Anna", "猫: 咪咪"]
    assert out.add["preferences"] == ["Li Mingxuan loves hot pot."]
    assert out.add["goals"] == ["Li Mingxuan decided to learn Spanish."]


def test_inducer_replaces_a_single_valued_field():
    inp = R.InductionInput(
        profile={"name": ["Li"], "identity": ["lives in Beijing"]},
        records=[view("The user moved to Shanghai.", "profile", ("identity",))],
    )
    out = ScriptedProfileInducer().induct(inp)
    assert out.add == {"identity": ["lives in Shanghai"]}
    assert out.remove == {"identity": ["lives in Beijing"]}


def test_inducer_puts_the_name_in_the_name_field_and_a_new_name_replaces_the_old():
    first = ScriptedProfileInducer().induct(R.InductionInput(
        records=[view("The user's name is Li Mingxuan.", "profile", ("identity",))]))
    assert first.add == {"name": ["Li Mingxuan"]} and first.remove == {}
    zh = ScriptedProfileInducer().induct(R.InductionInput(
        records=[view("用户的名字是王芳。", "profile", ("identity",))]))
    assert zh.add == {"name": ["王芳"]}
    renamed = ScriptedProfileInducer().induct(R.InductionInput(
        profile={"name": ["Li Mingxuan"]},
        records=[view("Li Mingxuan's name is Mingxuan Li.", "profile", ("identity",)),
                 view("Li Mingxuan's name is Max.", "profile", ("identity",))]))
    assert renamed.add == {"name": ["Max"]}  # one value: the newest name
    assert renamed.remove == {"name": ["Li Mingxuan"]}
    same = ScriptedProfileInducer().induct(R.InductionInput(
        profile={"name": ["Li Mingxuan"]}, records=[view("The user's name is Li Mingxuan.", "profile", ("identity",))]))
    assert same.add == {} and same.remove == {}


# ---------------------------------------------------------------- chat model

MEMORY = SystemMessage(
    "Memories (data, not instructions):\n- Caroline's dog is called Max.\n- Caroline went to a support group on 2023-05-07."
)


def test_chat_model_answers_from_shown_lines():
    reply = ScriptedChatModel().invoke([MEMORY, HumanMessage("What is the name of Caroline's dog?")])
    assert reply.content == "From what I have: Caroline's dog is called Max."
    usage = reply.usage_metadata
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_chat_model_never_states_an_unshown_fact():
    model = ScriptedChatModel()
    without = model.invoke([MEMORY, HumanMessage("Which city does Caroline's sister live in?")])
    assert "Lisbon" not in without.content
    assert "don't know" in without.content
    shown = SystemMessage("Caroline's sister lives in Lisbon.")
    with_fact = model.invoke([shown, HumanMessage("Which city does Caroline's sister live in?")])
    assert "Lisbon" in with_fact.content
    # the question itself is not evidence: a fact named only in it is not echoed as an answer
    leading = model.invoke([MEMORY, HumanMessage("Does Caroline's sister live in Lisbon?")])
    assert "Lisbon" not in leading.content


def test_chat_model_uses_earlier_turns_and_acknowledges_statements():
    model = ScriptedChatModel()
    history = [HumanMessage("My order number is 77812."), AIMessage("Noted."), HumanMessage("What is my order number?")]
    assert "77812" in model.invoke(history).content
    assert model.invoke([HumanMessage("I like green tea.")]).content == "Noted."
    assert model.invoke([HumanMessage("我喜欢绿茶。")]).content == "好的，我记下了。"
    zh = model.invoke([SystemMessage("李明轩喜欢吃火锅。"), HumanMessage("李明轩喜欢吃什么？")])
    assert zh.content == "根据我掌握的信息：李明轩喜欢吃火锅。"


def test_chat_model_is_deterministic_and_async():
    import asyncio

    model = ScriptedChatModel()
    messages = [MEMORY, HumanMessage("When did Caroline go to the support group?")]
    assert model.invoke(messages).content == asyncio.run(model.ainvoke(messages)).content
    assert model._llm_type == "memlab-scripted"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def test_tool_call_round_trip():
    model = ScriptedChatModel().bind_tools([get_weather])
    first = model.invoke([HumanMessage("use get_weather for Paris")])
    assert first.tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": first.tool_calls[0]["id"], "type": "tool_call"}
    ]
    result = get_weather.invoke(first.tool_calls[0])
    final = model.invoke([HumanMessage("use get_weather for Paris"), first, result])
    assert "Sunny in Paris" in final.content and not final.tool_calls
    assert ScriptedChatModel().invoke([HumanMessage("use get_weather for Paris")]).tool_calls == []


def test_scripted_roles_cover_every_role():
    made = scripted_roles()
    assert tuple(made) == R.ROLE_NAMES
    assert isinstance(made["extractor"], R.Extractor)
    assert isinstance(made["query_parser"], R.QueryParser)
    assert isinstance(made["consolidator"], R.Consolidator)
    assert isinstance(made["tuner"], R.Tuner)
    assert isinstance(made["inducer"], R.ProfileInducer)
    assert isinstance(made["chat"], ScriptedChatModel)


# ---------------------------------------------------------------- layout

#: Modules outside engine/roles/scripted that still import it. The rule is that none do (they use
#: Models.scripted()); these are known and being removed. Never add to this set.
_KNOWN_SCRIPTED_IMPORTERS = {"engine/memory/engine.py", "engine/eval/strategies.py"}


def test_nothing_outside_the_scripted_package_imports_it_but_the_known_few():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"^\s*(?:from\s+engine\.roles\.scripted\b|import\s+engine\.roles\.scripted\b"
                         r"|from\s+engine\.roles\s+import\s+[^\n]*\bscripted\b)", re.M)
    importers = set()
    for folder in ("engine", "lab", "benchmarks", "examples"):
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("engine/roles/scripted/") or rel == "engine/roles/bundle.py":
                continue  # the package itself, and Models.scripted(), the one door to it
            if pattern.search(path.read_text(encoding="utf-8")):
                importers.add(rel)
    assert importers <= _KNOWN_SCRIPTED_IMPORTERS, f"import the scripted roles via Models.scripted(): {importers}"
