"""engine.core.lru.LRU: the one bounded least-recently-used map behind the in-process caches."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.lru import LRU


def test_the_least_recently_used_leaves_first_and_get_is_a_use():
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recently used
    lru.put("c", 3)
    assert list(lru) == ["a", "c"] and "b" not in lru


def test_peek_and_replace_are_not_uses():
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.peek("a") == 1
    lru.replace("a", 10)
    lru.put("c", 3)
    assert list(lru) == ["b", "c"]
    with pytest.raises(KeyError):
        lru.replace("zz", 0)


def test_weights_bound_the_total_and_an_entry_over_the_budget_evicts_nothing():
    lru: LRU[str, list[int]] = LRU(5, weigh=len)
    assert lru.put("a", [1, 2])
    assert lru.put("b", [1, 2, 3])
    assert lru.weight == 5
    assert not lru.put("huge", list(range(6)))  # alone over the budget: not kept, nothing evicted
    assert list(lru) == ["a", "b"] and lru.weight == 5
    lru.replace("a", [1, 2, 3, 4])  # a patch grows it; trim restores the budget
    assert lru.weight == 7
    lru.trim()
    assert list(lru) == ["b"] and lru.weight == 3


def test_reweigh_follows_values_that_grew_in_place():
    lru: LRU[str, list[int]] = LRU(6, weigh=len)
    a, b = [1, 2], [1, 2]
    lru.put("a", a)
    lru.put("b", b)
    a.extend([3, 4, 5])  # "a" grew after it was kept
    assert lru.weight == 4
    lru.reweigh()
    assert list(lru) == ["b"] and lru.weight == 2


def test_drop_pop_clear():
    lru: LRU[tuple[str, int], int] = LRU(10)
    for u in ("u1", "u2"):
        for i in range(3):
            lru.put((u, i), i)
    assert lru.drop(lambda k: k[0] == "u1") == 3
    assert {k[0] for k in lru} == {"u2"}
    assert lru.pop(("u2", 0)) == 0 and lru.pop(("u2", 0), -1) == -1
    lru.clear()
    assert len(lru) == 0 and lru.weight == 0


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="negative"):
        LRU(-1)


_ops = st.lists(st.tuples(st.sampled_from(["put", "get", "peek", "pop"]), st.integers(0, 7), st.integers(1, 4)),
                max_size=60)


@given(budget=st.integers(0, 10), ops=_ops)
def test_matches_a_plain_ordered_dict_model(budget, ops):
    """Against the pattern it replaced (OrderedDict, move_to_end, popitem(last=False)), by weight."""
    lru: LRU[int, int] = LRU(budget, weigh=lambda v: v)
    model: OrderedDict[int, int] = OrderedDict()
    for op, key, value in ops:
        if op == "put":
            if value > budget:
                model.pop(key, None)
            else:
                model[key] = value
                model.move_to_end(key)
                while sum(model.values()) > budget:
                    model.popitem(last=False)
            assert lru.put(key, value) == (value <= budget)
        elif op == "get":
            if key in model:
                model.move_to_end(key)
            assert lru.get(key) == model.get(key)
        elif op == "peek":
            assert lru.peek(key) == model.get(key)
        else:
            assert lru.pop(key) == model.pop(key, None)
        assert lru.items() == list(model.items())
        assert lru.weight == sum(model.values()) <= budget


def test_per_object_keeps_a_value_per_object_and_forgets_all_when_full():
    from engine.core.lru import per_object

    calls = []

    @per_object(maxsize=2)
    def size(obj):
        calls.append(obj)
        return len(obj)

    a, b, c = [1], [1], [1, 2]  # a and b are equal, not the same object
    assert size(a) == 1 and size(a) == 1 and calls == [a]
    assert size(b) == 1 and len(calls) == 2  # another object: computed for it
    size(c)  # a third object: the two kept go, c is kept
    size(a)
    assert len(calls) == 4 and size(c) == 2 and len(calls) == 4
