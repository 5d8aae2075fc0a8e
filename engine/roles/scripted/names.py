"""Is this a person's name? Chinese names and self-introductions (我是X / 我叫X / 我的名字是X).

A Chinese name is two to four Han characters that jieba tags as a person's name, or that start
with a surname the segmenter keeps apart (林小雨, 王大锤), a compound surname (欧阳娜娜), or a
familiar 小/老/阿 + surname (小李). "我是老师" states an occupation, "我是来退货的" a purpose,
"我是北京人" an origin: none is a name. "我叫外卖" orders food: jieba reads 叫外卖 as one verb.
"""

from __future__ import annotations

import re

from engine.core.attributes import CHINESE_SURNAMES
from engine.core.text import segmenter

__all__ = ["COMPOUND_SURNAMES", "ZH_OCCUPATION", "is_chinese_name", "chinese_self_name"]

COMPOUND_SURNAMES = frozenset("欧阳 司马 诸葛 上官 东方 慕容 令狐 皇甫 尉迟 公孙 夏侯 长孙 宇文 司徒 端木 轩辕 独孤 南宫 西门".split())
ZH_OCCUPATION = re.compile(
    r"(?:工程师|分析师|设计师|会计师|律师|医生|护士|老师|教师|教授|学生|经理|程序员|厨师|司机|记者|编辑|销售|顾问|研究员|"
    r"建筑师|摄影师|作家|画家|演员|公务员|店主|主管|总监|产品经理)$"
)
_FAMILIAR = re.compile(r"^[小老阿](?P<s>.)$")
_SELF_NAME = re.compile(
    r"我(?P<verb>叫|的名字是|的名字叫|名叫|是)(?P<n>[\u4e00-\u9fff]{2,4}?)"
    r"(?=[，。,.!！？?；;、\s~～]|$|我|今年|是|在|来自|住)"
)


def _segments(text: str) -> list[tuple[str, str]]:
    segmenter()  # loads jieba's dictionary once, quietly
    import jieba.posseg as pseg

    return [(p.word, p.flag) for p in pseg.cut(text)]


def is_chinese_name(text: str) -> bool:
    """Two to four Han characters that read as a person's name (not an occupation or common word)."""
    if not re.fullmatch(r"[\u4e00-\u9fff]{2,4}", text or "") or ZH_OCCUPATION.search(text):
        return False
    if (m := _FAMILIAR.match(text)) and m.group("s") in CHINESE_SURNAMES:
        return True
    if text[:2] in COMPOUND_SURNAMES and len(text) >= 3:
        return True
    segments = _segments(text)
    if all(flag.startswith("nr") for _, flag in segments):
        return True
    # a surname the segmenter keeps apart: 林小雨, 王大锤 (黄金, 高手, 马上 are one common word)
    return text[0] in CHINESE_SURNAMES and len(text) <= 3 and segments[0][0] == text[0]


def chinese_self_name(text: str) -> str | None:
    """The name a Chinese self-introduction gives ("我叫王芳", "我是李明轩", "我的名字是安娜"), else None."""
    for m in _SELF_NAME.finditer(text or ""):
        name, verb = m.group("n"), m.group("verb")
        if verb == "是":
            if is_chinese_name(name):
                return name
            continue
        if verb == "叫" and not any(word == "叫" for word, _ in _segments(text[m.start():m.end() + 2])):
            continue  # 叫外卖, 叫车: a verb, not "is called"
        if not ZH_OCCUPATION.search(name) and not name.startswith(("了", "过", "着")):
            return name
    return None
