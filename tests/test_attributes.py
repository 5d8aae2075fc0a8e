"""engine.core.attributes: single-valued attributes read from a record's canonical content."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.attributes import (
    ATTRIBUTE_NAMES,
    StatedAttribute,
    attribute_of,
    comparable_value,
    same_attribute,
    stated_attribute,
    values_agree,
)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Li Mingxuan lives in Beijing Chaoyang.", ("residence", "beijing chaoyang")),
        ("The user moved to Shanghai.", ("residence", "shanghai")),
        ("Ann is from Lisbon.", ("origin", "lisbon")),  # where one is from is not where one lives
        ("The user's name is Li Mingxuan.", ("name", "li mingxuan")),
        ("Caroline's phone number is 555-0101.", ("phone", "555 0101")),
        ("Caroline's email is c.lee@mail.example.", ("email", "c lee mail example")),
        ("Omar's address is 12 Rue Cler, Paris.", ("address", "12 rue cler paris")),
        ("Ann works at Google.", ("employer", "google")),
        ("Ann is employed by Acme Corp now.", ("employer", "acme corp")),
        ("Li Mingxuan works as a data analyst.", ("occupation", "data analyst")),
        ("Li Mingxuan's favourite food is hot pot.", ("favourite:food", "hot pot")),
        ("Ann is 34 years old.", ("age", "34")),
    ],
)
def test_english_attributes(content, expected):
    assert attribute_of(content) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("李明轩住在北京朝阳区。", ("residence", "北京 朝阳区")),
        ("李明轩搬到上海了。", ("residence", "上海")),
        ("用户的名字是王芳。", ("name", "王芳")),
        ("李明轩的手机号是13800001111。", ("phone", "13800001111")),
        ("李明轩的邮箱是li@mail.example。", ("email", "li mail example")),
        ("王芳就职于腾讯。", ("employer", "腾讯")),
        ("王芳是一名老师。", ("occupation", "老师")),
        ("王芳今年30岁。", ("age", "30")),
    ],
)
def test_chinese_attributes(content, expected):
    assert attribute_of(content) == expected


@pytest.mark.parametrize(
    "content",
    ["Ann loves hot pot.", "Ann went hiking on 2026-01-04.", "Ann joined a book club.", "Ann works at a hospital.",
     "我在北京工作。", "王芳喜欢火锅。", "", "Ann lives in .", "   "],
)
def test_statements_without_a_single_valued_attribute(content):
    assert attribute_of(content) is None


def test_stated_attribute_keeps_the_value_as_written():
    found = stated_attribute("Li lives in Beijing Chaoyang!")
    assert found == StatedAttribute(name="residence", raw="Beijing Chaoyang", value="beijing chaoyang", subject="li")
    assert stated_attribute("李明轩住在北京朝阳区。").raw == "北京朝阳区"
    assert stated_attribute("王芳在阿里巴巴公司上班。").raw == "阿里巴巴公司"
    assert {n.split(":")[0] for n in ATTRIBUTE_NAMES} >= {"name", "residence", "phone", "email", "employer"}


def test_comparable_values_and_agreement():
    assert comparable_value("Beijing, Chaoyang.") == comparable_value("beijing chaoyang") == "beijing chaoyang"
    assert comparable_value("ＢＥＩＪＩＮＧ") == "beijing"  # NFKC: full-width letters
    assert comparable_value("the") == "the"  # only stopwords: kept, never emptied
    assert values_agree("Beijing", "Beijing Chaoyang") and values_agree("beijing chaoyang", "Beijing")
    assert not values_agree("Beijing", "Shanghai")
    assert not values_agree(attribute_of("Ann lives in Porto.")[1], attribute_of("Ann lives in Lisbon.")[1])
    assert values_agree(attribute_of("用户住在北京。")[1], attribute_of("用户住在北京朝阳区。")[1])


@given(st.text(max_size=300))
def test_never_raises_and_returns_a_named_non_empty_value(text):
    out = attribute_of(text)
    assert out is None or (out[0].split(":")[0] in ATTRIBUTE_NAMES and out[1] != "")


@given(st.text(max_size=120), st.text(max_size=120))
def test_agreement_is_symmetric_and_reflexive(a, b):
    assert values_agree(a, b) == values_agree(b, a)
    assert values_agree(a, a)


@pytest.mark.parametrize(
    ("content", "name", "value", "subject"),
    [
        ("The detective is now called Inês.", "name:detective", "inês", ""),
        ("The user said: The detective is called Tomás.", "name:detective", "tomás", ""),
        ("The user asked to rename the detective to Inês.", "name:detective", "inês", ""),
        ("Caroline's dog is called Max.", "name:dog", "max", "caroline"),
        ("The user's sister's name is Ana.", "name:sister", "ana", "the user"),  # not the user's own name
        ("The user's name is Li Mingxuan.", "name", "li mingxuan", "the user"),
        ("李明轩的猫叫咪咪。", "name:猫", "咪咪", "李明轩"),
        ("侦探现在叫伊内斯。", "name:侦探", "伊 内斯", ""),
        ("用户的妹妹的名字是安娜。", "name:妹妹", "安娜", "用户"),
        ("Ana lives in Porto.", "residence", "porto", "ana"),
        ("The user now lives in Porto.", "residence", "porto", "the user"),
        ("The user's sister Ana lives in Porto.", "residence", "porto", "the user's sister ana"),
        ("The user's new phone number is 555-1234.", "phone", "555 1234", "the user"),
        ("The user's work phone number is 555-1234.", "phone:work", "555 1234", "the user"),
        ("The user's billing address is 12 Rue Cler.", "address:billing", "12 rue cler", "the user"),
        ("用户的新手机号是13922223333。", "phone", "13922223333", "用户"),
        ("王芳今年30岁。", "age", "30", "王芳"),
        ("Ann is from Lisbon.", "origin", "lisbon", "ann"),
        ("王芳来自成都。", "origin", "成都", "王芳"),
    ],
)
def test_attributes_name_their_subject_and_named_things(content, name, value, subject):
    found = stated_attribute(content)
    assert (found.name, found.value, found.subject) == (name, value, subject)


@pytest.mark.parametrize(
    "content", ["The user no longer lives in Lisbon.", "李明轩不再住在北京。", "The user doesn't live in Paris.",
                "用户昨天叫了外卖。", "用户叫车去机场。"],
)
def test_negated_statements_and_other_verbs_state_no_attribute(content):
    assert stated_attribute(content) is None


def test_same_attribute_needs_the_same_subject():
    user_city, ana_city = stated_attribute("The user lives in Lisbon."), stated_attribute("Ana lives in Porto.")
    assert not same_attribute(user_city, ana_city)
    assert same_attribute(user_city, stated_attribute("The user moved to Porto."))
    assert same_attribute(stated_attribute("The detective is called Tomás."),
                          stated_attribute("The detective is now called Inês."))
    assert not same_attribute(stated_attribute("Caroline's dog is called Max."),
                              stated_attribute("Caroline's cat is called Max."))
    assert not same_attribute(user_city, None) and not same_attribute(None, None)


@pytest.mark.parametrize("content", [
    "These days the user's favourite coffee is a cortado.",
    "The user's favourite coffee now is a cortado.",
    "Honestly, the user's favourite coffee is a cortado.",
    "Lately, the user's favourite coffee is a cortado.",
])
def test_sentence_adverbials_are_not_part_of_the_subject_or_the_attribute(content):
    found = stated_attribute(content)
    assert found is not None and (found.name, found.subject, found.value) == ("favourite:coffee", "the user", "cortado")
