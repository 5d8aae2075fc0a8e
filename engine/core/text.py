"""Text for retrieval: one tokeniser for English and Chinese, used by the index and the queries.

FTS5's unicode61 tokenizer keeps a run of Chinese characters as one token (北京 would not match
我住在北京朝阳区), so Chinese is segmented into words with jieba before indexing and querying;
the index then stores space-separated tokens and unicode61 splits on the spaces.

A store that keeps every user's text in one index gives each term a per-user key
(`user_key`): `index_text(text, key=...)` and `fts_query(text, key=...)` write every token as
key + token, cut into the letter/digit runs unicode61 keeps as one term, so one user's postings
are one doclist per term and a common word costs what the user's own records hold.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

__all__ = [
    "tokenize",
    "content_tokens",
    "content_token_set",
    "index_text",
    "fts_query",
    "fts_terms",
    "user_key",
    "USER_KEY_CHARS",
    "is_cjk",
    "has_cjk",
    "jaccard",
    "normalize",
    "STOPWORDS",
    "keywords",
    "split_sentences",
    "split_clauses",
    "segmenter",
]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(
    r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
    r"|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+(?:['’][^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)*",
    re.UNICODE,
)

#: _TOKEN on ASCII text: letters and digits ([^\W_] there), joined by ASCII apostrophes.
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")

STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there when where why
    how all any both each few more most other some such no nor not only own same so than too very s t can
    will just don should now i me my myself we our ours ourselves you your yours yourself yourselves he him
    his himself she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did doing would
    could ought i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd she'd
    we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't hasn't haven't hadn't
    doesn't don't didn't won't wouldn't shan't shouldn't can't cannot couldn't mustn't let's that's who's
    what's here's there's when's where's why's how's also yes yeah oh ok okay hi hey hello thanks thank
    really just like get got go going went us im ive id dont didnt cant wont lol
    的 了 和 是 在 我 你 他 她 它 我们 你们 他们 这 那 也 都 就 吗 呢 吧 啊 哦 嗯 与 及 或 一个 有 没有 不 很 还 要 会
    """.split()
)

_jieba_lock = threading.Lock()
_jieba = None


def segmenter():
    """jieba, imported and initialised once (it prints to stderr on first use; silence that).

    Call it before using any jieba module (e.g. jieba.posseg) so the dictionary loads quietly, once.
    """
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def normalize(text: str) -> str:
    """NFKC, lower case, invalid surrogates dropped."""
    if text.isascii():  # NFKC leaves ASCII as it is, and it holds no surrogates
        return text.lower()
    text = text.encode("utf-8", "ignore").decode("utf-8") if _has_surrogates(text) else text
    return unicodedata.normalize("NFKC", text).lower()


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def is_cjk(token: str) -> bool:
    return bool(token) and all(_CJK.match(ch) for ch in token)


def tokenize(text: str) -> list[str]:
    """Word tokens in order: Latin/digit words lower-cased, Chinese runs segmented by jieba."""
    if text.isascii():  # _TOKEN restricted to ASCII, on the lower-cased text: the same tokens, faster
        return _ASCII_TOKEN.findall(text.lower())
    norm = normalize(text)
    if not _CJK.search(norm):  # no segmentation, one findall
        found = _TOKEN.findall(norm)
        return [t.replace("’", "'") for t in found] if "’" in norm else found
    out: list[str] = []
    for match in _TOKEN.finditer(norm):
        tok = match.group(0).replace("’", "'")
        if _CJK.match(tok):
            out.extend(w for w in segmenter().lcut(tok) if w.strip())
        else:
            out.append(tok)
    return out


def content_tokens(text: str) -> list[str]:
    """Tokens without stopwords (and without possessive 's), for keywords and overlap."""
    out = []
    for tok in tokenize(text):
        if tok.endswith("'s"):
            tok = tok[:-2]
        if tok and tok not in STOPWORDS:
            out.append(tok)
    return out


def content_token_set(text: str) -> frozenset[str]:
    """`frozenset(content_tokens(text))`, with set operations instead of a check per token."""
    toks = set(tokenize(text))
    for tok in [t for t in toks if t.endswith("'s")]:  # the possessive dropped
        toks.discard(tok)
        toks.add(tok[:-2])
    toks.difference_update(STOPWORDS)
    toks.discard("")
    return frozenset(toks)


#: Length of a user key: lowercase base32 (a-z, 2-7), 50 bits of a hash of the user id.
USER_KEY_CHARS = 10
#: What unicode61 keeps as one term: a run of letters and digits (it splits on everything else, '_' too).
_PIECE = re.compile(r"[^\W_]+", re.UNICODE)


@lru_cache(maxsize=4096)
def user_key(user_id: str) -> str:
    """The user's term prefix: alphanumeric, fixed length, the same for the same id in every process.

    Two ids may share a key (50 bits); a store still filters rows by owner, so a collision costs
    postings, never privacy.
    """
    digest = hashlib.blake2b(str(user_id).encode("utf-8", "surrogatepass"), digest_size=8,
                             person=b"memlab-fts-key").digest()
    return base64.b32encode(digest).decode("ascii")[:USER_KEY_CHARS].lower()


def _keyed(key: str, token: str) -> list[str]:
    """The unicode61 terms of one token, each prefixed with the key ("don't" -> [key+"don", key+"t"])."""
    if token.isalnum():  # the common case: one run of letters and digits, one term
        return [key + token]
    return [key + piece for piece in _PIECE.findall(token)]


def index_text(text: str, *, key: str = "") -> str:
    """The text as FTS5 should index it: space-separated tokens (Chinese segmented).

    With a `key` (see `user_key`) every unicode61 term of every token carries it.
    """
    tokens = tokenize(text)
    if not key:
        return " ".join(tokens)
    if all(map(str.isalnum, tokens)):  # the common case: every token is one unicode61 term
        return key + (" " + key).join(tokens) if tokens else ""
    return " ".join(term for tok in tokens for term in _keyed(key, tok))


def fts_terms(text: str, *, max_terms: int = 64, key: str = "") -> list[str]:
    """The phrases `fts_query` OR-s, unquoted: the query's content tokens (all its tokens when it
    has none), deduplicated; with a `key`, each the space-separated keyed terms of its token."""
    terms = list(dict.fromkeys(content_tokens(text)))[:max_terms]
    if not terms:
        terms = list(dict.fromkeys(tokenize(text)))[:max_terms]
    if key:
        terms = list(dict.fromkeys(" ".join(_keyed(key, t)) for t in terms))
        terms = [t for t in terms if t]
    return terms


def fts_query(text: str, *, max_terms: int = 64, key: str = "", prefix: int = 0) -> str | None:
    """A safe FTS5 MATCH expression: the query's content tokens, each quoted, OR-ed.

    Every token is wrapped in double quotes (inner quotes doubled), so FTS5 syntax in user text
    (NEAR, *, -, column filters, parentheses) is inert. None when nothing is searchable. With a
    `key`, each token becomes the phrase of its keyed terms, as `index_text(..., key=key)` wrote them.
    `prefix` > 0: a plain ASCII word is cut to its stem (`prefix_stem`) and, when the stem has at
    least `prefix` letters, matches every indexed word it begins ("research" finds "researching").
    """
    terms = list(dict.fromkeys(content_tokens(text)))[:max_terms]
    if not terms:
        terms = list(dict.fromkeys(tokenize(text)))[:max_terms]
    if prefix > 0:
        terms = list(dict.fromkeys(prefix_stem(t, prefix) for t in terms))
    phrases = [(" ".join(_keyed(key, t)) if key else t, _open_ended(t, prefix)) for t in terms]
    phrases = list(dict.fromkeys((p, star) for p, star in phrases if p))
    if not phrases:
        return None
    return " OR ".join('"' + p.replace('"', '""') + '"' + (" *" if star else "") for p, star in phrases)


_ENDING = re.compile(r"(?:ing|ed|es|s)$")


def prefix_stem(token: str, least: int) -> str:
    """A plain ASCII word without one plural / -ing / -ed ending when at least `least` letters stay
    ("paintings" -> "painting", "researching" -> "research"); other tokens unchanged."""
    if not (token.isascii() and token.isalpha()):
        return token
    cut = _ENDING.sub("", token)
    return cut if len(cut) >= least else token


def _open_ended(token: str, least: int) -> bool:
    return least > 0 and token.isascii() and token.isalpha() and len(token) >= least


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B| over normalised strings (0 when both are empty)."""
    sa = {normalize(x).strip() for x in a if x and x.strip()}
    sb = {normalize(x).strip() for x in b if x and x.strip()}
    if not sa and not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
_CLAUSE_SPLIT = re.compile(
    r"[,，]\s*(?:and\s+|but\s+|then\s+|also\s+)|\s+(?:but|and then|and also)\s+|[，,]\s*(?=(?:而且|但是|但|然后|还|并且|另外))"
    # a new first-person clause: "Hi, I'm Li, I work as ..." / "I'm Alice and I'm allergic ..."
    r"|[,，;]\s*(?=(?:I|I'm|I've|I'd|I'll|my|My)\b)|\s+and\s+(?=(?:I|I'm|I've|my)\b)|[，；,]\s*(?=我)"
    r"|(?<=[\u4e00-\u9fff])[，,]\s*(?=(?:是|在|住|喜欢|讨厌|有|对|今年)[\u4e00-\u9fff])"
)


def split_sentences(text: str) -> list[str]:
    """Sentences of an English or Chinese text (ends at . ! ? 。！？ ; or a newline), stripped.

    A period between digits ("3.5", "v1.2") or after a one-letter initial does not end a sentence.
    """
    # a period inside a token (3.5, v1.2, omar.h@mail.example, example.com) does not end a sentence
    protected = re.sub(r"(?<=[\w@])\.(?=[\w@])", "\u2024", text or "")
    protected = re.sub(r"\b(Mr|Mrs|Ms|Dr|St|e\.g|i\.e|vs|etc)\.", lambda m: m.group(0).replace(".", "\u2024"), protected)
    parts = _SENTENCE_END.split(protected)
    return [p.replace("\u2024", ".").strip() for p in parts if p and p.strip()]


#: a clause that cannot stand alone keeps the clause after it ("because I was busy, I stayed home")
_SUBORDINATE = re.compile(r"^(?:because|since|although|though|if|when|while|as|因为|由于|为了|如果|虽然|尽管|当)", re.I)
_SUBORDINATE_ZH = re.compile(r"^(?:因为|由于|为了|如果|虽然|尽管|当)")
_LEADING_CONJUNCTION = re.compile(r"^(?:(?:and|but|so|then|also)\s+|(?:而且|但是|但|然后|并且|另外|还有))", re.I)


def split_clauses(sentence: str) -> list[str]:
    """A sentence cut at coordinating joints (", and", ", but", "，而且"), conjunctions dropped."""
    raw = [p for p in _CLAUSE_SPLIT.split(sentence) if p and p.strip(" ,，；;")]
    merged: list[str] = []
    for part in raw:
        if merged and _SUBORDINATE.match(merged[-1].strip()):
            merged[-1] = f"{merged[-1].rstrip()}，{part.strip()}" if _SUBORDINATE_ZH.match(merged[-1].strip()) \
                else f"{merged[-1].rstrip(' ,')}, {part.strip()}"
        else:
            merged.append(part)
    parts = (_LEADING_CONJUNCTION.sub("", p.strip(" ,，")).strip(" ,，") for p in merged)
    return [p for p in parts if p]


def keywords(text: str, *, limit: int = 8, extra: Iterable[str] = ()) -> list[str]:
    """Up to `limit` content words, names and numbers first, then by frequency, then by order.

    Capitalised words in the original text (names, places) and tokens containing digits (order
    numbers, card tails) rank first because they are what a later question names.
    """
    tokens = [t for t in content_tokens(text) if len(t) > 1 or is_cjk(t) or t.isdigit()]
    if not tokens:
        return list(dict.fromkeys(normalize(e) for e in extra))[:limit]
    capitalised = {normalize(w) for w in re.findall(r"\b[A-Z][\w'’-]*", text or "")}
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        counts[tok] = counts.get(tok, 0) + 1
        first.setdefault(tok, i)
    boosted = {normalize(e) for e in extra}

    def rank(tok: str) -> tuple:
        salient = tok in boosted or tok in capitalised or any(ch.isdigit() for ch in tok)
        return (not salient, -counts[tok], first[tok])

    ordered = sorted(counts, key=rank)
    return ordered[:limit]
