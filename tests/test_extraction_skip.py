"""`skip_contentless`: a window whose user messages state nothing (information questions,
acknowledgements) costs no extractor call; a statement or a request always reaches the extractor."""

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import Message
from engine.memory.engine import MemoryEngine
from engine.memory.extraction import contentless, recall_question, says_nothing

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("text", ["Can I pay in instalments for large orders?", "Do you ship to Ningbo as well?",
                                  "Is the kettle available in blue?", "快递一般几天能到?", "Thanks!", "Good morning.", "谢谢。"])
def test_questions_and_acknowledgements_state_nothing(text):
    assert contentless(text)


@pytest.mark.parametrize("text", ["I live in Hangzhou.", "How do I update my email preferences?",
                                  "Could you add two bags of flour to my next order?", "我是做什么工作的?",
                                  "We are moving next month?", "Thanks, I'm vegetarian by the way.", "no, I said Tuesday",
                                  "Yes.", "No", "Sure!", "ok", "好的。"])
def test_statements_requests_and_first_person_questions_are_extracted(text):
    assert not contentless(text)


def _m(i, role, text):
    return Message(id=i, user_id="u", session_id="s", role=role, content=text, created_at=T0)


def test_a_window_says_nothing_only_when_no_user_message_states_anything():
    assert says_nothing([_m(1, "assistant", "Noted.")])
    assert not says_nothing([_m(1, "assistant", "Are you allergic to nuts?"), _m(2, "user", "Yes.")])
    assert says_nothing([_m(1, "user", "Do you gift wrap?"), _m(2, "assistant", "Yes, we love birthdays!")])
    assert not says_nothing([_m(1, "user", "Do you gift wrap?"), _m(2, "assistant", "Yes."),
                             _m(3, "user", "My sister's birthday is on Friday.")])


@pytest.mark.parametrize("skip", [True, False])
def test_an_event_over_questions_calls_no_extractor_and_moves_the_cursor(skip):
    clock = VirtualClock(T0)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01,
                                                   trigger_threshold=2, skip_contentless=skip), clock=clock)
    for line in ["What are your opening hours?", "Do you ship to Ningbo?", "Is express shipping extra?"]:
        engine.turn("alice", "s1", line)
        clock.advance(timedelta(minutes=1))
    calls = [e for e in engine.events(kind="extraction")]
    skipped = [e for e in engine.events(kind="extract") if e.payload.get("skipped")]
    assert (calls == []) == skip and bool(skipped) == skip
    assert engine.store.get_cursor("alice", "s1", "extract") > 0
    engine.turn("alice", "s1", "I live in Hangzhou.")
    clock.advance(timedelta(minutes=1))
    engine.turn("alice", "s1", "Thanks.")
    assert any("Hangzhou" in r.content for r in engine.store.records("alice"))


_KNOWN = {"order", "dog", "receipt"}


@pytest.mark.parametrize("text", ["When does my order arrive?", "What do I need for my dog?",
                                  "Do I need to bring my receipt?", "What is my next order's total?"])
def test_a_question_about_what_memory_holds_states_nothing(text):
    assert not contentless(text)  # on its own, "my" could be news
    assert recall_question(text, lambda w: w in _KNOWN)


@pytest.mark.parametrize("text", ["What do I need for my cat?",  # no cat on record: the user has a cat
                                  "Could you add flour to my order?",  # a request
                                  "When do we get our order?",  # "we": the user as a subject
                                  "My order is late?", "I moved, where is my order?", "我的订单是什么?"])
def test_news_requests_and_first_person_questions_still_reach_the_extractor(text):
    assert not recall_question(text, lambda w: w in _KNOWN)


def test_an_event_skips_a_question_about_a_known_thing_but_not_one_about_a_new_thing():
    clock = VirtualClock(T0)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01,
                                                   trigger_threshold=2), clock=clock)

    def event_over(line):
        before = len(engine.events(kind="extraction"))
        engine.turn("alice", "s1", line)
        clock.advance(timedelta(minutes=1))
        engine.turn("alice", "s1", "Thanks.")
        clock.advance(timedelta(minutes=1))
        return len(engine.events(kind="extraction")) - before

    assert event_over("I ordered a blue kettle last week, my order number is 4411.") == 1
    assert any("kettle" in r.content for r in engine.store.records("alice"))
    assert event_over("When does my order arrive?") == 0
    assert event_over("What do I need for my puppy?") == 1


@pytest.mark.parametrize("text", ["How do I update my email preferences?",  # everyone has an email
                                  "When is my birthday?", "What was my previous order number?",
                                  "我对什么过敏?", "我是做什么工作的?", "我现在住在哪个城市?"])
def test_questions_about_what_every_user_has_or_about_the_asker_state_nothing(text):
    assert recall_question(text, lambda w: w in _KNOWN)


@pytest.mark.parametrize("text", ["When does my order 4411 arrive?",  # the number may be news
                                  "When does my order from IKEA arrive?",  # so may a name
                                  "How do I change my email to bob@example.com?",
                                  "Where can I see my loyalty points?",  # the user has loyalty points
                                  "我明天去北京，那边天气怎么样?",  # a second clause states a plan
                                  "我们什么时候到?", "我的狗需要什么?"])
def test_questions_carrying_a_value_a_clause_or_a_new_thing_reach_the_extractor(text):
    assert not recall_question(text, lambda w: w in _KNOWN)
