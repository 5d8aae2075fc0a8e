"""The scripted extractor on the general phenomena of issue 13, each on several sentences (English
and Chinese), with the cases that must not change beside them."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.forgetting import tag_union
from engine.core.records import TYPE_SCORES
from engine.roles import types as R
from engine.roles.llm.roles import LLMExtractor
from engine.roles.scripted import ScriptedExtractor
from engine.roles.scripted.lang import is_question
from engine.roles.scripted.salience import is_filler, is_tautology

TZ = timezone(timedelta(hours=8))
AT = datetime(2023, 5, 8, 15, 0, tzinfo=TZ)  # a Monday
DAY = "2023-05-08"


def extract(*texts, speaker="user", context=()):
    new = [R.WindowMessage(id=i + 10, role="user", speaker=speaker, content=t, at=AT) for i, t in enumerate(texts)]
    ctx = [R.WindowMessage(id=i + 1, role=role, speaker=role if role != "user" else speaker, content=t, at=AT)
           for i, (role, t) in enumerate(context)]
    return ScriptedExtractor().extract(R.ExtractionInput(user_id="u", session_id="s", context=ctx, new=new)).records


def one(*texts, **kw):
    records = extract(*texts, **kw)
    assert len(records) == 1, [r.content for r in records]
    return records[0]


def contents(records):
    return [r.content for r in records]


# ---------------------------------------------------------------- 1. requests phrased as questions


@pytest.mark.parametrize(
    ("text", "needle", "theme"),
    [
        ("could you add two bags of oat flour to my next delivery?", "add two bags of oat flour", "shopping"),
        ("Can you cancel my Thursday booking?", "cancel the user's Thursday booking", "schedule"),
        ("would you send the invoice to accounts@example.com?", "send the invoice to accounts@example.com", None),
        ("Would you mind moving my appointment to Friday?", "move the user's appointment to Friday", "schedule"),
        ("Can you remind me to call mom tomorrow?", "remind the user to call mom on 2023-05-09", "family"),
        ("Hi, could you please swap the rice in my order for quinoa?", "swap the rice", "shopping"),
    ],
)
def test_a_request_phrased_as_a_question_is_a_decision_record(text, needle, theme):
    rec = one(text)
    assert rec.content.startswith(f"On {DAY} the user asked to") and needle in rec.content
    assert rec.memory_type == "episodic" and "decision" in rec.tags
    assert rec.time in (DAY, "2023-05-09") and rec.keywords
    assert theme is None or rec.theme == theme


@pytest.mark.parametrize(
    ("text", "needle"),
    [("能帮我把下次的快递加两袋燕麦粉吗？", "燕麦粉"), ("可以把我的订单取消吗？", "订单取消"),
     ("麻烦帮我把预约改到周五，好吗？", "预约改到")],
)
def test_a_chinese_request_is_a_decision_record(text, needle):
    rec = one(text)
    assert rec.content.startswith(f"用户在{DAY}请求") and needle in rec.content and "我" not in rec.content
    assert rec.memory_type == "episodic" and "decision" in rec.tags


@pytest.mark.parametrize(
    "text",
    ["What are your opening hours?", "Could you tell me your opening hours?", "Can you ship to Canada?",
     "Can you remind me what time the store opens?", "Will you be open on Sunday?", "Can you do that?",
     "Can I return a phone if I just don't like it?", "你们几点开门？", "能告诉我怎么退货吗？", "可以帮我查一下订单吗？",
     "你们能送到上海吗？"],
)
def test_a_question_for_information_stays_a_question(text):
    assert extract(text) == []


def test_a_request_for_advice_is_still_advice():
    rec = one("Can you recommend a restaurant in Porto?")
    assert rec.content.startswith(f"On {DAY} the user asked for advice:") and rec.tags == ["episode", "decision"]


def test_remember_that_keeps_the_statement_itself():
    assert one("Can you remember that I'm vegetarian?").content == "The user is vegetarian."
    assert one("记住我对花生过敏。").content == "用户对花生过敏。"


# ---------------------------------------------------------------- 2. a sentence-initial month


@pytest.mark.parametrize(
    ("text", "question"),
    [("May delivery goes to the office.", False), ("May 5 is my birthday.", False), ("May was a busy month.", False),
     ("Will is my brother.", False), ("March deliveries go to the office.", False),
     ("May I ask a question", True), ("may we pay later", True), ("Will you be there", True),
     ("Will Ana come", True), ("May I?", True)],
)
def test_a_month_or_a_name_first_is_not_a_modal(text, question):
    assert is_question(text) is question


def test_a_sentence_starting_with_a_month_is_recorded():
    rec = one("May delivery goes to the office.")
    assert "May delivery goes to the office" in rec.content and {"may", "delivery", "office"} <= set(rec.keywords)
    assert "birthday" in one("May 5 is my birthday.").content
    assert one("Will is my brother.").content == "Will is the user's brother."
    assert "decision" not in one("Will is my brother.").tags  # Will the name, not the modal


# ---------------------------------------------------------------- 3. pronouns → the last named person


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["My sister Ana is a nurse.", "She lives in Porto."], "Ana lives in Porto."),
        (["My sister Ana is a nurse. She lives in Porto."], "Ana lives in Porto."),
        (["My brother Tom is a chef. He loves his job."], "Tom loves Tom's job."),
        (["I met Sarah at the gym. I told her about the book."], "The user told Sarah about the book."),
        (["My friend Sam got a new job. They are moving to Berlin."], "Sam is moving to Berlin."),
        (["Ana, my colleague, is great. She is from Lisbon."], "Ana is from Lisbon."),
        (["My sister Ana is a nurse. My brother is a chef. She lives in Porto."], "Ana lives in Porto."),
        (["My sister is called Ana. Her husband is a chef."], "Ana's husband is a chef."),
        (["A girl named Mia finds a key. She opens the door."], "Mia opens the door."),
        (["The character Elena is a spy.", "Elena meets Viktor. He's her old handler."], "Viktor is Elena's old handler."),
        (["My brother Tom is a chef. He's got a new restaurant."], "Tom has got a new restaurant."),
    ],
)
def test_pronouns_resolve_to_the_last_named_person(texts, expected):
    assert expected in contents(extract(*texts))


def test_pronouns_resolve_across_the_window_context():
    records = extract("She moved to Porto last year.", context=[("user", "My sister Ana is a nurse.")])
    assert contents(records) == ["Ana moved to Porto in 2022."]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [(["我妹妹安娜是护士。她住在波尔图。"], "安娜住在波尔图。"), (["我哥哥叫大卫。", "他在上海工作。"], "大卫在上海工作。"),
     (["我的朋友小李来了，她很喜欢猫。"], "小李很喜欢猫。")],
)
def test_chinese_pronouns_resolve_to_the_last_named_person(texts, expected):
    assert any(expected.rstrip("。") in c for c in contents(extract(*texts))), contents(extract(*texts))


@pytest.mark.parametrize(
    ("texts", "unchanged"),
    [
        (["My sister Ana is a nurse. My brother is a chef. He lives in Porto."], "He lives in Porto"),  # brother: unnamed
        (["My parents visited. They loved Porto."], "They loved Porto"),  # a group, no name
        (["Tom and Ana came over. They brought wine."], "They brought wine"),
        (["She lives in Porto."], "She lives in Porto"),  # nobody named
        (["I'm Ana.", "She lives in Porto."], "She lives in Porto"),  # the user is never a referent
        (["我哥哥是厨师。他住在上海。"], "他住在上海"),
        (["我妹妹叫安娜。其他人都不在。"], "其他人"),  # 其他 is not 他
    ],
)
def test_pronouns_without_a_named_antecedent_stay(texts, unchanged):
    records = extract(*texts)
    assert any(unchanged in c for c in contents(records)), contents(records)
    assert not any(c.startswith(("The user lives", "Ana lives", "用户住")) for c in contents(records))


def test_a_named_speaker_is_not_a_referent():
    records = extract("My sister is a nurse. She lives in Porto.", speaker="Caroline")
    assert "Caroline lives in Porto." not in contents(records)


# ---------------------------------------------------------------- 4. Chinese names


@pytest.mark.parametrize(
    ("text", "name"),
    [("我是王芳。", "王芳"), ("我叫安娜。", "安娜"), ("我的名字是张晓明。", "张晓明"), ("我是小李，今天来问问。", "小李"),
     ("我是欧阳娜娜。", "欧阳娜娜"), ("我是林小雨，我住在杭州。", "林小雨")],
)
def test_chinese_self_introductions_are_names(text, name):
    records = extract(text)
    assert f"用户的名字是{name}。" in contents(records)
    rec = next(r for r in records if "名字" in r.content)
    assert rec.tags == ["identity"] and rec.memory_type == "profile" and rec.theme == "identity"


@pytest.mark.parametrize(
    "text", ["我是老师。", "我是来退货的。", "我是北京人。", "我是一个程序员。", "我叫了外卖。", "我是新来的。", "我是你的粉丝。",
             "我是陈。", "我是黄金会员。"],
)
def test_chinese_statements_that_are_not_names(text):
    assert not any("名字" in c for c in contents(extract(text)))


def test_a_chinese_name_names_the_user_afterwards():
    records = extract("我是王芳。我住在北京。")
    assert contents(records) == ["用户的名字是王芳。", "王芳住在北京。"]
    assert "王芳是一名老师。" in contents(extract("我是王芳，是一名老师。"))


# ---------------------------------------------------------------- 5. no filler, no tautologies


@pytest.mark.parametrize(
    "text", ["By the way.", "Okay", "Thanks!", "哈哈", "好的", "嗯嗯", "Well, anyway.", "Oh, I see.", "对了，", "行吧。",
             "Hmm...", "So yeah.", "Never mind!", "😂", "Anyway, thanks a lot!", "Thank you so much."],
)
def test_filler_yields_no_record(text):
    assert is_filler(text)
    assert extract(text) == []


def test_filler_around_content_is_dropped_and_the_content_kept():
    assert contents(extract("By the way, I moved to Porto.")) == ["The user lives in Porto."]
    assert contents(extract("Oh and my sister is a nurse.")) == ["The user's sister is a nurse."]
    assert contents(extract("对了，我住在杭州。")) == ["用户住在杭州。"]
    assert not is_filler("By the way, I moved to Porto.")


@pytest.mark.parametrize(
    ("speaker", "text", "expected"),
    [("Li Mingxuan", "My name is Li Mingxuan.", "The user's name is Li Mingxuan."),
     ("李明轩", "我叫李明轩。", "用户的名字是李明轩。"),
     ("user", "My name is Carol Jensen.", "The user's name is Carol Jensen."),
     ("Caroline", "Call me Carol.", "Caroline's name is Carol.")],
)
def test_no_tautological_name_records(speaker, text, expected):
    assert contents(extract(text, speaker=speaker)) == [expected]


@pytest.mark.parametrize(
    ("content", "tautology"),
    [("Li's name is Li.", True), ("The user is the user.", True), ("王芳是王芳。", True), ("用户的名字是用户。", True),
     ("Li's name is Li Mingxuan.", False), ("The user is a nurse.", False), ("王芳是老师。", False)],
)
def test_tautology_check(content, tautology):
    assert is_tautology(content) is tautology


# ---------------------------------------------------------------- 6. whose pet, whose preference


@pytest.mark.parametrize(
    "text", ["My neighbour's dog barks all night.", "My neighbour loves dogs.", "My sister hates cilantro.",
             "I think my sister really likes sushi.", "Her favourite colour is green.", "我妹妹喜欢猫。",
             "她最喜欢吃火锅。"],
)
def test_someone_elses_preference_is_not_the_users(text):
    for rec in extract(text):
        assert "preference" not in rec.tags and rec.memory_type != "profile", rec


def test_a_neighbours_pet_is_an_episode_about_the_neighbour():
    rec = one("My neighbour's dog barks all night.")
    assert rec.content == "The user's neighbour's dog barks all night."
    assert rec.memory_type == "episodic" and "episode" in rec.tags and rec.theme == "pets"


@pytest.mark.parametrize(
    "text", ["I love dogs.", "I really love my neighbour's dog.", "Love the new design!", "My favourite food is dumplings.",
             "We both prefer window seats.", "我也很喜欢猫。", "我最喜欢的水果是芒果。"],
)
def test_the_speakers_own_preference_stays_a_preference(text):
    rec = one(text)
    assert "preference" in rec.tags and rec.memory_type == "profile"


# ---------------------------------------------------------------- 7. life events and open problems


@pytest.mark.parametrize(
    ("text", "theme"),
    [("My father passed away last month.", "family"), ("我爸爸上个月去世了。", "family"),
     ("We got married last Saturday.", "family"), ("I got laid off yesterday.", "work"), ("我被裁员了。", "work"),
     ("My grandmother Rosa died last week.", "family"), ("I graduated from university in June.", "education"),
     ("My wife had a baby on Friday.", "family"), ("I broke my leg skiing.", "health"),
     ("我上周刚换了工作。", "work"), ("I retired last year.", "work")],
)
def test_life_events_are_salient_episodes_with_their_theme(text, theme):
    rec = one(text)
    assert "episode" in rec.tags and "fact" in rec.tags and rec.memory_type == "episodic"
    assert rec.theme == theme
    assert tag_union(rec.tags) > TYPE_SCORES["fact"] > TYPE_SCORES["chat"]  # not low-salience chat


@pytest.mark.parametrize(
    ("text", "theme"),
    [("My refund still hasn't arrived.", "shopping"), ("The heater is still broken.", "problem"),
     ("The washing machine still doesn't work.", None), ("The boiler keeps leaking.", "problem"), ("I was charged twice for my order.", "shopping"),
     ("I want to complain about the delivery driver.", "shopping"), ("我的退款一直没收到。", "shopping"),
     ("我的洗衣机坏了。", "problem"), ("快递还没到。", "shopping")],
)
def test_open_problems_are_dated_episodes(text, theme):
    rec = one(text)
    assert {"episode", "fact"} <= set(rec.tags) and rec.memory_type == "episodic"
    assert rec.time == DAY  # reported that day
    assert ("问题" if "的" in text or "没" in text else "problem") in rec.keywords
    assert theme is None or rec.theme == theme


@pytest.mark.parametrize(
    "text", ["My phone died yesterday.", "I don't work on Fridays.", "There's a promotion on shoes.",
             "I'm still not sure.", "我饿坏了。", "我一直没去过日本。", "I never complain.",
             "The character Elena is a retired spy."],
)
def test_ordinary_statements_are_not_life_events_or_problems(text):
    for rec in extract(text):
        assert "problem" not in rec.keywords and "问题" not in rec.keywords
        assert rec.theme != "family"


# ---------------------------------------------------------------- 8. safety


@pytest.mark.parametrize(
    ("text", "keywords", "theme"),
    [("I'm allergic to peanuts.", {"allergy", "allergic", "medical", "peanuts"}, "health"),
     ("I have a severe shellfish allergy.", {"allergy", "medical"}, "health"),
     ("I'm lactose intolerant.", {"allergy", "medical"}, "health"),
     ("我对花生过敏。", {"过敏", "医疗", "花生"}, "health"),
     ("I take blood thinners.", {"medical"}, "health"), ("I have type 1 diabetes.", {"medical"}, "health"),
     ("我有糖尿病。", {"医疗"}, "health"),
     ("I have a restraining order against my ex.", {"legal"}, "legal"),
     ("My visa doesn't allow me to work.", {"legal"}, "legal"),
     ("I use a wheelchair.", {"accessibility"}, "health"), ("I use a screen reader.", {"accessibility"}, "health"),
     ("I'm hard of hearing.", {"accessibility"}, "health"), ("我坐轮椅。", {"无障碍"}, "health")],
)
def test_safety_constraints_are_tagged_with_their_class(text, keywords, theme):
    rec = one(text)
    assert "safety" in rec.tags and rec.memory_type == "profile" and rec.lasting
    assert keywords <= set(rec.keywords), rec.keywords
    assert rec.theme == theme


def test_someone_elses_safety_constraint_is_a_fact_not_the_users_profile():
    rec = one("My son is allergic to nuts.")
    assert "safety" in rec.tags and rec.memory_type == "fact" and {"allergy", "nuts"} <= set(rec.keywords)


@pytest.mark.parametrize(
    "text", ["I'm not allergic to anything.", "I have no allergies.", "I paid with my Visa card.",
             "I went on a blind date.", "我不过敏。", "I love spicy food."],
)
def test_no_safety_tag_without_a_constraint(text):
    for rec in extract(text):
        assert "safety" not in rec.tags


def test_a_diagnosis_is_both_a_life_event_and_a_safety_constraint():
    rec = one("I was diagnosed with diabetes in March.")
    assert {"episode", "safety"} <= set(rec.tags) and rec.time == "2023-03" and "medical" in rec.keywords


# ---------------------------------------------------------------- 9. one-off instructions


@pytest.mark.parametrize(
    "text",
    ["Ship this one to my office, only this time.", "Just this once, send it to my sister's address.",
     "For this order only, leave it with the neighbour.", "Please deliver it to the back door this time only.",
     "could you add two bags of oat flour to my next delivery?", "I'd like it gift-wrapped, just this once.",
     "这次先寄到公司，只这一次。", "这一单就寄到我妈家，下不为例。", "这次先寄到公司。"],
)
def test_one_off_instructions_do_not_last(text):
    records = extract(text)
    assert records and all(not r.lasting for r in records), [(r.content, r.lasting) for r in records]


@pytest.mark.parametrize(
    "text",
    ["Always ship to my office.", "From now on, send invoices to accounts@example.com.",
     "Please charge the card ending in 9031, as usual.", "Never call me before 9am.", "以后都寄到公司。",
     "每次都放门口就行。"],
)
def test_durable_instructions_last_and_are_preferences(text):
    rec = one(text)
    assert rec.lasting and "preference" in rec.tags and rec.memory_type == "profile"


@pytest.mark.parametrize(
    "text", ["This time last year I was in Paris.", "I'm going to win this time.", "I live in Lisbon.",
             "这次旅行很开心。", "I'm allergic to peanuts.", "Ship it to 12 Larch Lane, Bristol."],
)
def test_statements_and_plain_instructions_stay_lasting(text):
    assert all(r.lasting for r in extract(text))


def test_an_imperative_is_an_instruction_but_a_noun_first_is_not():
    assert one("Ship it to 12 Larch Lane, Bristol.").content == f"On {DAY} the user asked to ship it to 12 Larch Lane, Bristol."
    assert one("Never call me before 9am.").content == "The user asked never to call the user before 9am."
    assert one("Don't leave it at the door.").content == f"On {DAY} the user asked not to leave it at the door."
    assert one("Order number is 123.").content == "The user said: Order number is 123."
    assert one("Book club was fun.").content == "The user said: Book club was fun."
    assert one("Call me Ishmael.").content == "The user's name is Ishmael."


# ---------------------------------------------------------------- 11. the LLM extractor's prompt


def test_the_llm_extractor_prompt_names_the_safety_tag_and_the_lasting_flag():
    prompt = LLMExtractor.instructions
    assert "safety" in prompt and "lasting" in prompt and "only this time" in prompt
    assert prompt == LLMExtractor.instructions  # a constant: identical bytes every call


# ---------------------------------------------------------------- any text


_WORDS = st.sampled_from(
    "I my she he her his they my sister Ana Tom could you please add cancel send ship May Will is was called now "
    "this time only always never allergic wheelchair visa refund still broken passed away moved to Porto Lisbon "
    "by the way okay 我 我是 我叫 王芳 她 他 妹妹 叫 这次 以后 过敏 坏了 吗 ？ ? . , ，。 and but".split()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_WORDS, st.text(max_size=6)), max_size=18).map(" ".join), st.sampled_from(["user", "Li"]))
def test_any_text_gives_well_formed_records(text, speaker):
    for rec in extract(text, speaker=speaker):
        assert rec.content.strip() and not is_tautology(rec.content)
        assert set(rec.tags) <= set(TYPE_SCORES) and rec.tags
        assert rec.memory_type in ("fact", "episodic", "profile") and isinstance(rec.lasting, bool)
        assert len(rec.keywords) <= 8 and rec.source_ids == [10]


def test_a_state_is_not_a_life_event():
    assert one("The character Elena is a retired spy.").memory_type == "fact"
    assert one("I'm married.").tags == ["fact"]
    meeting = one("I moved the meeting to Friday.")
    assert "identity" not in meeting.tags and meeting.theme == "work" and "residence" not in meeting.keywords
