"""The question's vector without the names it mentions (opt-in: `unnamed_query`).

A person's name is said in a large share of their records ("Melanie said: ...", "Melanie took
the kids to the museum"), so in a dense search a name pulls the question toward any record that
names the person rather than toward the topic asked about. With `unnamed_query` w > 0 the
question's unit vector is mixed with the unit vector of the question with its proper names taken
out (capitalised words that do not start a sentence, with their possessive: "What activities has
Melanie done with her family?" → "What activities has done with her family?"), (1 - w)·q + w·q',
renormalised; the mix is the vector the dense path, the message candidates and the message path
all use. One more embedding per question that names someone; BM25 and the dimension path keep
the question as asked (a name is a rare, useful word there).

Measured on LoCoMo dev5 (MiniLM, scripted extraction; engine.eval.locomo): w 0.35 took all
.645/.744/.796 -> .670/.766/.820 @5/10/20 and multi-hop @20 .621 -> .659 (w 0.2/0.3/0.4/0.6 @10:
.754/.759/.766/.756), every conversation up @10.
"""

from __future__ import annotations

import re

from engine.memory.messagepath import unit

__all__ = ["strip_names", "unnamed_vector"]

_WORD = re.compile(r"[^\W\d_][\w+'’-]*")
_POSSESSIVE = ("'s", "’s")
_ENDS = (".", "!", "?", ":", ";")


def strip_names(text: str) -> str:
    """`text` without its capitalised words that do not start a sentence (names, with their
    possessive; "I" stays); the text itself when nothing was taken out, nothing would be left, or
    the text is capitalised throughout (Title Case or shouting: capitals say nothing there)."""
    toks = text.split()
    words = [(t, _WORD.search(t)) for t in toks]
    caps = [w is not None and w.group(0)[0].isupper() for _, w in words]
    if sum(caps) * 2 > sum(w is not None for _, w in words):
        return text
    out: list[str] = []
    first = True
    for (tok, w), cap in zip(words, caps, strict=True):
        if w is not None and cap and not first and w.group(0) != "I":
            rest = tok[w.end():]  # trailing punctuation stays ("Paris?" -> "?")
            if rest and rest not in _POSSESSIVE and not rest[0].isalnum():
                out.append(rest)
            first = rest[-1:] in _ENDS
            continue
        first = (first and w is None) or tok[-1:] in _ENDS
        out.append(tok)
    got = " ".join(out).strip()
    return got if re.sub(r"\W+", "", got) and got != " ".join(toks) else text


def unnamed_vector(embedder, text: str, qvec, weight: float):
    """The question's vector moved `weight` of the way toward its name-less text's vector (unit
    vectors mixed, the mix renormalised); `qvec` itself when the question names nobody."""
    bare = strip_names(text)
    if bare == text or weight <= 0:
        return qvec
    mix = (1.0 - weight) * unit(qvec) + weight * unit(embedder.embed_query(bare))
    return unit(mix).tolist()
