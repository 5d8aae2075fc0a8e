"""engine.stores.sqlite.bm25 gives exactly FTS5's bm25() scores and order on random corpora."""

from __future__ import annotations

import contextlib
import sqlite3 as stdlib_sqlite3
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_conformance import T0, rec

from engine.core.text import fts_query, index_text, user_key
from engine.stores.sqlite import SQLiteStore
from engine.stores.sqlite.bm25 import DocLengths, averages, best, doc_lengths, doc_lengths_packed, score_terms, varints
from engine.stores.sqlite.driver import sqlite_module

sqlite3 = sqlite_module() or stdlib_sqlite3  # the engine's driver: contentless_delete where SQLite has it

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
USERS = ["u1", "u2", "u3"]


def _table(docs, deleted):
    conn = sqlite3.connect(":memory:")
    content = ", content='', contentless_delete=1" if tuple(sqlite3.sqlite_version_info) >= (3, 43) else ""
    conn.execute(f"CREATE VIRTUAL TABLE records_fts USING fts5(body{content}, tokenize='unicode61')")
    conn.execute("CREATE VIRTUAL TABLE temp.fv USING fts5vocab(main, records_fts, instance)")
    for rid, (user, words) in enumerate(docs, start=1):
        conn.execute("INSERT INTO records_fts(rowid, body) VALUES (?, ?)",
                     (rid, index_text(" ".join(words), key=user_key(user))))
    for rid in deleted:
        conn.execute("DELETE FROM records_fts WHERE rowid = ?", (rid,))
    conn.commit()
    return conn


docs_st = st.lists(st.tuples(st.sampled_from(USERS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)),
                   min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(docs=docs_st, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
       user=st.sampled_from(USERS), data=st.data())
def test_scores_and_order_equal_fts5(docs, query, user, data):
    deleted = data.draw(st.sets(st.integers(1, len(docs)), max_size=len(docs) // 2))
    conn = _table(docs, deleted)
    key = user_key(user)
    match = " OR ".join(f'"{key}{w}"' for w in query)
    want = conn.execute("SELECT rowid, bm25(records_fts) s FROM records_fts WHERE records_fts MATCH ? "
                        "ORDER BY s, rowid", (match,)).fetchall()
    got = score_terms(conn, [key + w for w in query], vocab="temp.fv")
    assert got is not None
    ids, scores = got
    order = np.lexsort((ids, scores))
    assert [int(i) for i in ids[order]] == [r for r, _ in want]
    np.testing.assert_allclose(scores[order], [s for _, s in want], rtol=1e-12, atol=0)
    mine = ",".join(str(i) for i, (u, _) in enumerate(docs, start=1) if u == user) or "0"
    cache = doc_lengths(conn, f"SELECT id, sz FROM records_fts_docsize WHERE id IN ({mine})")
    cached = score_terms(conn, [key + w for w in query], vocab="temp.fv", lengths=cache)
    assert cached is not None
    assert np.array_equal(cached[0], ids) and np.array_equal(cached[1], scores)


def test_a_cache_missing_a_match_declines():
    conn = _table([("u1", ["alpha"]), ("u1", ["alpha", "beta"])], set())
    cache = doc_lengths(conn, "SELECT id, sz FROM records_fts_docsize WHERE id = 1")
    assert score_terms(conn, [user_key("u1") + "alpha"], vocab="temp.fv", lengths=cache) is None


def test_phrases_and_folded_terms_are_left_to_fts5():
    conn = _table([("u1", ["alpha"])], set())
    assert score_terms(conn, ["abc def"], vocab="temp.fv") is None
    assert score_terms(conn, ["Alpha"], vocab="temp.fv") is None
    assert score_terms(conn, ["café"], vocab="temp.fv") is None


@pytest.mark.parametrize("long_words", [40, 127, 128, 300])
def test_a_users_lengths_read_in_one_row_equal_the_rows_or_decline(long_words):
    """The packed read (one row: ids and docsize bytes concatenated) gives the row-by-row lengths
    exactly while every document has fewer than 128 tokens (its docsize is one byte); a longer one
    (a two-byte varint) makes it decline, and the cache is read row by row, the same lengths."""
    store = SQLiteStore(":memory:", dim=4)
    v = [1.0, 0.0, 0.0, 0.0]
    try:
        store.add_records([rec("u1", " ".join(WORDS[i % 10] for i in range(n))) for n in (3, long_words, 7)], [v] * 3)
        store.add_records([rec("u2", "alpha beta")], [v])
        conn = store.conn
        rows = doc_lengths(conn, DocLengths.SQL, ("u1",))
        assert len(rows[0]) == 3 and rows[1].tolist()[1] == long_words
        packed = doc_lengths_packed(conn, DocLengths.PACKED_SQL, ("u1",))
        if long_words < 128:
            assert packed is not None
            assert np.array_equal(packed[0], rows[0]) and np.array_equal(packed[1], rows[1])
            assert packed[0].dtype == rows[0].dtype and packed[1].dtype == rows[1].dtype
        else:
            assert packed is None
        cache = DocLengths().get("u1", conn)
        assert np.array_equal(cache[0], rows[0]) and np.array_equal(cache[1], rows[1])
        none = doc_lengths_packed(conn, DocLengths.PACKED_SQL, ("nobody",))
        assert none is not None and len(none[0]) == len(none[1]) == 0
    finally:
        store.close()


def test_varints_round_trip_sqlite_encoding():
    assert varints(bytes([0x05])) == [5]
    assert varints(bytes([0x81, 0x00, 0x7F])) == [128, 127]


def _fts5_reference(store, user, query, k, include_invalid):
    """search_bm25's FTS5 path, run directly: every match joined to the user's rows."""
    valid = "" if include_invalid else " AND r.valid = 1"
    rows = store.conn.execute(
        "WITH hits AS MATERIALIZED (SELECT rowid AS id, bm25(records_fts) AS s FROM records_fts "
        "WHERE records_fts MATCH ?) "
        f"SELECT h.id, h.s FROM hits h JOIN records r ON r.id = h.id WHERE r.user_id = ?{valid} "
        "ORDER BY h.s, h.id LIMIT ?",
        (fts_query(query, key=user_key(user)), user, k),
    ).fetchall()
    return [(int(i), -float(s)) for i, s in rows]


ops_st = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(USERS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)),
    st.tuples(st.just("update"), st.integers(0, 60), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)),
    st.tuples(st.just("supersede"), st.integers(0, 60), st.integers(0, 60)),
    st.tuples(st.just("forget"), st.sampled_from(USERS), st.just(None)),
    st.tuples(st.just("search"), st.sampled_from(USERS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(ops=ops_st, k=st.integers(1, 12), include_invalid=st.booleans(), in_transaction=st.booleans())
def test_store_search_bm25_equals_fts5_through_writes(ops, k, include_invalid, in_transaction):
    """The store's numpy path (its length cache patched by adds and updates, dropped by forget)
    returns what FTS5's bm25 ranks, for every user, after any sequence of writes; also with
    all of them inside one transaction, as the update step writes and searches (FTS5 ranks the
    transaction's own rows, and so must the numpy path)."""
    store = SQLiteStore(":memory:", dim=4)
    owned: list = []
    try:
        with store.transaction() if in_transaction else contextlib.nullcontext():
            _writes_and_searches(store, owned, ops, k, include_invalid)
    finally:
        store.close()


def _writes_and_searches(store, owned, ops, k, include_invalid):
    """`test_store_search_bm25_equals_fts5_through_writes`' ops, each followed by a search of every user."""
    for op, a, b in ops:
        if op == "add":
            owned += store.add_records([rec(a, " ".join(b))], [[1.0, 0.0, 0.0, 0.0]])
        elif op == "update" and owned:
            r = owned[a % len(owned)]
            if store.get_records(r.user_id, [r.id]):
                store.update_record(replace(r, content=" ".join(b)))
        elif op == "supersede" and owned:
            old, new = owned[a % len(owned)], owned[b % len(owned)]
            live = {x.id for x in store.records(old.user_id, include_invalid=True)}
            if old.user_id == new.user_id and old.id != new.id and {old.id, new.id} <= live:
                store.supersede(old.user_id, old.id, new.id, T0)
        elif op == "forget":
            store.forget_user(a)
        for n, user in enumerate(USERS):
            if (n + len(owned)) % 2:  # the user's vectors in memory: current rows known without a join
                store.search_dense(user, [1.0, 0.0, 0.0, 0.0], k=1)
            query = " ".join(b) if op == "search" else WORDS[len(owned) % len(WORDS)]
            got = store.search_bm25(user, query, k=k, include_invalid=include_invalid)
            assert got == _fts5_reference(store, user, query, k, include_invalid)


def test_many_superseded_best_matches_stay_on_the_numpy_path():
    """A long session supersedes many records: when fewer than k of the best 2k+16 matches are
    current, the scorer reads further slices of its own ranking (still FTS5's order) instead of
    declining to FTS5's join over every match."""
    store = SQLiteStore(":memory:", dim=4)
    try:
        v = [1.0, 0.0, 0.0, 0.0]
        strong = store.add_records([rec("u1", "alpha alpha alpha") for _ in range(60)], [v] * 60)
        weak = store.add_records([rec("u1", f"alpha {' '.join(WORDS[1:])} {i}") for i in range(30)], [v] * 30)
        store.add_records([rec("u2", "alpha alpha alpha") for _ in range(20)], [v] * 20)
        for old in strong[:-1]:
            store.supersede("u1", old.id, strong[-1].id, T0)
        answered = []
        real = store._bm25_numpy
        store._bm25_numpy = lambda *a: answered.append(real(*a)) or answered[-1]  # type: ignore[method-assign]
        for k, include_invalid in ((5, False), (20, False), (40, False), (20, True)):
            got = store.search_bm25("u1", "alpha", k=k, include_invalid=include_invalid)
            assert got == _fts5_reference(store, "u1", "alpha", k, include_invalid)
            assert answered[-1] is not None
        assert {i for i, _ in store.search_bm25("u1", "alpha", k=40)} >= {r.id for r in weak}
    finally:
        store.close()


def test_postings_cache_is_bounded_and_patched_by_written_rows():
    from engine.stores.sqlite.bm25 import Postings

    conn = stdlib_sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, t, instance)")
    conn.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", [(1, "a a b"), (2, "a c"), (3, "b")])
    cache = Postings(budget=3)
    ids, counts = cache.get(conn, "temp.v", "a")
    assert ids.tolist() == [1, 2] and counts.tolist() == [2, 1]
    cache.get(conn, "temp.v", "b")  # 4 doc ids > 3: the least recently used term ("a") leaves
    assert len(cache) == 1
    cache.written([(4, None, "x b b")])  # a new row joins the kept term with its count
    assert [a.tolist() for a in cache.get(conn, "temp.v", "b")] == [[1, 3, 4], [1, 1, 2]]
    cache.written([(1, "a a b", "a c")])  # row 1 loses "b"
    assert [a.tolist() for a in cache.get(conn, "temp.v", "b")] == [[3, 4], [1, 2]]
    cache.get(conn, "temp.v", "c")
    cache.written([(5, None, "caf\u00e9")])  # unicode61 would fold it: everything goes
    assert len(cache) == 0


def test_store_postings_follow_rollbacks_and_other_connections(tmp_path):
    """A term read before a rolled-back write, or before another connection's commit, is read again."""
    path = str(tmp_path / "m.db")
    a, b = SQLiteStore(path, dim=4), SQLiteStore(path, dim=4)
    v = [1.0, 0.0, 0.0, 0.0]
    try:
        a.add_records([rec("u1", "alpha beta")], [v])
        first = a.search_bm25("u1", "alpha", k=5)
        assert len(first) == 1
        b.add_records([rec("u1", "alpha gamma")], [v])  # another connection: a's cache is stale
        assert a.search_bm25("u1", "alpha", k=5) == _fts5_reference(a, "u1", "alpha", 5, False)
        assert len(a.search_bm25("u1", "alpha", k=5)) == 2
        try:
            with a.transaction():
                a.add_records([rec("u1", "alpha delta")], [v])
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        assert a.search_bm25("u1", "alpha", k=5) == _fts5_reference(a, "u1", "alpha", 5, False)
    finally:
        a.close()
        b.close()


def test_superseded_matches_filtered_by_the_users_vectors_in_memory():
    """With the user's vectors in memory the numpy path filters superseded rows by their flags
    there (no join); the answer is still FTS5's, with and without history."""
    store = SQLiteStore(":memory:", dim=4)
    v = [1.0, 0.0, 0.0, 0.0]
    try:
        got = store.add_records([rec("u1", "alpha " * (3 - i % 3) + WORDS[i % 10]) for i in range(12)], [v] * 12)
        store.add_records([rec("u2", "alpha alpha")], [v])
        for old in got[:6]:
            store.supersede("u1", old.id, got[-1].id, T0)
        store.search_dense("u1", v, k=1)
        for k in (1, 3, 8):
            for hist in (False, True):
                assert store.search_bm25("u1", "alpha", k=k, include_invalid=hist) == \
                    _fts5_reference(store, "u1", "alpha", k, hist)
    finally:
        store.close()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "update"]), st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)),
                min_size=1, max_size=12))
def test_patched_postings_equal_the_index(ops):
    """Whatever the store writes, a kept term's postings are the index's: searched before and after
    each write, the answer is FTS5's own."""
    store = SQLiteStore(":memory:", dim=4)
    v = [1.0, 0.0, 0.0, 0.0]
    try:
        ids = [r.id for r in store.add_records([rec("u1", "alpha beta gamma"), rec("u1", "beta delta")], [v, v])]
        for word in WORDS:
            store.search_bm25("u1", word, k=50)  # keep every word's postings
        for op, words in ops:
            text = " ".join(words)
            if op == "add" or not ids:
                ids.append(store.add_records([rec("u1", text)], [v])[0].id)
            else:
                old = store.get_records("u1", [ids[len(text) % len(ids)]])[0]
                store.update_record(replace(old, content=text))
            for word in WORDS:
                assert store.search_bm25("u1", word, k=50) == _fts5_reference(store, "u1", word, 50, False)
        vocab = "temp.records_fts_vocab"
        from engine.stores.sqlite.bm25 import _counted, _postings_of

        for term, (got_ids, got_counts) in store._postings._terms.items():
            want_ids, want_counts = _counted(_postings_of(store.conn, vocab, [term])[0])
            assert got_ids.tolist() == want_ids.tolist() and got_counts.tolist() == want_counts.tolist()
    finally:
        store.close()


def test_inside_a_transaction_every_match_is_ranked_at_once():
    """The update step searches inside the event's transaction for a new record's older versions,
    the rows most often superseded: the numpy path answers there too (FTS5's ranking of every
    match, the transaction's new rows included), and where FTS5 answers (a prefix) the best-few
    pass (which lost 83 % of such searches in a long session and then cost a second FTS5 pass)
    is skipped for the ranking of every match."""
    store = SQLiteStore(":memory:", dim=4)
    try:
        v = [1.0, 0.0, 0.0, 0.0]
        strong = store.add_records([rec("u1", "alpha alpha alpha") for _ in range(60)], [v] * 60)
        store.add_records([rec("u1", f"alpha {' '.join(WORDS[1:])} {i}") for i in range(30)], [v] * 30)
        for old in strong[:-1]:
            store.supersede("u1", old.id, strong[-1].id, T0)
        first = []
        real = store._bm25_top_first
        store._bm25_top_first = lambda *a: first.append(a) or real(*a)  # type: ignore[method-assign]
        outside = store.search_bm25("u1", "alpha", k=20, prefix=3)  # a prefix: the numpy path declines
        assert outside == store.search_bm25("u1", "alpha", k=20)
        assert len(first) == 1  # outside a transaction the best few are tried first ...
        with store.transaction():
            new = store.add_records([rec("u1", "alpha alpha alpha alpha")], [v])[0]
            numpy_path = []
            real_numpy = store._bm25_numpy
            store._bm25_numpy = lambda *a: numpy_path.append(a) or real_numpy(*a)  # type: ignore[method-assign]
            got = store.search_bm25("u1", "alpha", k=20)
            assert len(numpy_path) == 1
            assert got == _fts5_reference(store, "u1", "alpha", 20, False)
            assert got[0][0] == new.id and [i for i, _ in got[1:]] == [i for i, _ in outside][:19]
            assert store.search_bm25("u1", "alpha", k=20, prefix=3) == got
        assert len(first) == 1  # ... but inside one the best-few pass is never tried
    finally:
        store.close()


def test_a_rollback_that_undid_the_vocab_table_is_followed():
    """The keyword path's fts5vocab table is made on the first search, inside a transaction when
    that is where the first search runs (the update step's): a rollback undoes it, and the next
    search makes it again instead of failing on a missing table."""
    store = SQLiteStore(":memory:", dim=4)
    try:
        store.add_records([rec("u1", "alpha beta")], [[1.0, 0.0, 0.0, 0.0]])
        with pytest.raises(RuntimeError), store.transaction():
            assert [i for i, _ in store.search_bm25("u1", "alpha", k=5)] == [1]
            raise RuntimeError("the event failed")
        assert [i for i, _ in store.search_bm25("u1", "alpha", k=5)] == [1]
    finally:
        store.close()


def test_inside_a_transaction_the_scores_count_the_transactions_rows():
    """FTS5 writes a transaction's rows and its row and token totals when a savepoint opens or the
    transaction commits: after bare INSERTs its averages record still holds the totals from before
    them, while FTS5's own bm25 counts them. score_terms makes FTS5 write them first (a savepoint
    opened and released), so its scores are FTS5's inside the transaction too."""
    conn = _table([("u1", ["alpha", "beta"]), ("u1", ["alpha"] * 3), ("u2", ["gamma"])], ())
    conn.isolation_level = None
    key = user_key("u1")
    conn.execute("BEGIN")
    for rid, words in ((10, ["alpha"] * 9 + ["beta"]), (11, ["beta", "gamma"]), (12, ["alpha", "delta"] * 4)):
        conn.execute("INSERT INTO records_fts(rowid, body) VALUES (?, ?)",
                     (rid, index_text(" ".join(words), key=key)))
    assert averages(conn)[0] == 3  # the record on disk: the totals from before the inserts
    match = f'"{key}alpha" OR "{key}beta"'
    want = conn.execute("SELECT rowid, bm25(records_fts) s FROM records_fts WHERE records_fts MATCH ? "
                        "ORDER BY s, rowid", (match,)).fetchall()
    ids, scores = score_terms(conn, [key + "alpha", key + "beta"], vocab="temp.fv")
    order = np.lexsort((ids, scores))
    assert [int(i) for i in ids[order]] == [r for r, _ in want]
    np.testing.assert_allclose(scores[order], [s for _, s in want], rtol=1e-12, atol=0)
    assert averages(conn)[0] == 6 and conn.in_transaction
    conn.execute("ROLLBACK")


@settings(max_examples=300, deadline=None)
@given(scores=st.lists(st.sampled_from([-3.5, -2.0, -2.0, -1.25, -1e-6, 0.0]), max_size=60), k=st.integers(0, 70),
       data=st.data())
def test_best_is_the_first_k_of_the_full_sort(scores, k, data):
    """`best` (partition, then sort only what can win) = the first k of lexsort((ids, scores)) among
    the kept positions, ties at the k-th score included and broken by id."""
    n = len(scores)
    ids = np.array(data.draw(st.permutations(range(1, n + 1))) if n else [], dtype=np.int64)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    s = np.array(scores, dtype=np.float64)
    order = np.lexsort((ids, s))
    assert best(ids, s, k).tolist() == order[:k].tolist()
    assert best(ids, s, k, keep).tolist() == order[keep[order]][:k].tolist()


@settings(max_examples=200, deadline=None)
@given(occurrences=st.lists(st.integers(0, 40), max_size=80), ordered=st.booleans())
def test_postings_are_counted_as_np_unique_counts_them(occurrences, ordered):
    """A term's occurrences (in doc order from the vocab table, or in any order) counted per doc."""
    from engine.stores.sqlite.bm25 import _counted

    occ = np.array(sorted(occurrences) if ordered else occurrences, dtype=np.int64)
    ids, counts = _counted(occ)
    want_ids, want_counts = np.unique(occ, return_counts=True)
    assert ids.tolist() == want_ids.tolist() and counts.tolist() == want_counts.tolist()
    assert ids.dtype == np.int64 and counts.dtype == np.int64


def test_a_large_users_tables_follow_appends_and_supersedes():
    """Past IdIndex's TABLE_MIN rows the length cache and the vector partition find ids through
    direct-address tables, extended as rows are appended: rankings stay FTS5's through writes."""
    from engine.stores.sqlite.idindex import TABLE_MIN

    store = SQLiteStore(":memory:", dim=4)
    try:
        v = [1.0, 0.0, 0.0, 0.0]
        n = TABLE_MIN + 100
        texts = [" ".join(WORDS[j % len(WORDS)] for j in range(i % 7, i % 7 + 1 + i % 4)) for i in range(n)]
        rows = []
        for start in range(0, n, 500):  # another user's rows between the user's: ids interleave
            part = texts[start:start + 500]
            rows += store.add_records([rec("u1", t) for t in part], [v] * len(part))
            store.add_records([rec("u2", "alpha beta")] * 40, [v] * 40)
        store.search_dense("u1", v, k=1)  # the user's vectors in memory: validity from the partition

        def same(word: str, k: int = 30) -> None:
            for hist in (False, True):
                assert store.search_bm25("u1", word, k=k, include_invalid=hist) == \
                    _fts5_reference(store, "u1", word, k, hist)

        for word in ("alpha", "gamma", "theta kappa"):
            same(word)
        assert store._doclens.indexed("u1", store.conn)[1].direct
        for round_ in range(3):  # appended rows (the index grows), supersedes (validity changes)
            new = store.add_records([rec("u1", f"alpha gamma {WORDS[round_]}") for _ in range(20)], [v] * 20)
            for old in rows[round_ * 50: round_ * 50 + 10]:
                store.supersede("u1", old.id, new[0].id, T0)
            store.add_records([rec("u2", "alpha")] * 5, [v] * 5)
            for word in ("alpha", "gamma", WORDS[round_]):
                same(word)
            asked = [r.id for r in new] + [rows[0].id, rows[-1].id]
            assert sorted(store.vectors("u1", asked)) == sorted(asked)
    finally:
        store.close()


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=12),
       kept=st.lists(st.sampled_from(WORDS + ["absent"]), max_size=4),
       asked=st.lists(st.sampled_from(WORDS + ["absent"]), min_size=1, max_size=8))
def test_postings_read_together_are_the_terms_read_one_by_one(docs, kept, asked):
    """A question's terms missing from the postings cache are read in one statement: each term's
    postings (repeated, absent and already kept ones alike) are exactly its own read alone."""
    from engine.core.text import fts_terms
    from engine.stores.sqlite.bm25 import Postings, _counted, _postings_of

    store = SQLiteStore(":memory:", dim=4)
    try:
        store.add_records([rec("u1", " ".join(d)) for d in docs], [[1.0, 0.0, 0.0, 0.0]] * len(docs))
        store.add_records([rec("u2", " ".join(WORDS))], [[1.0, 0.0, 0.0, 0.0]])  # another user's postings
        store.search_bm25("u1", "alpha", k=5)  # makes the vocab table
        vocab, key = "temp.records_fts_vocab", user_key("u1")

        def keyed(words):
            return [fts_terms(w, key=key)[0] for w in words]

        cache = Postings()
        cache.get_many(store.conn, vocab, keyed(kept)) if kept else None
        got = cache.get_many(store.conn, vocab, keyed(asked))
        want = [_counted(_postings_of(store.conn, vocab, [t])[0]) for t in keyed(asked)]  # each alone
        assert [(i.tolist(), c.tolist()) for i, c in got] == [(i.tolist(), c.tolist()) for i, c in want]
    finally:
        store.close()
