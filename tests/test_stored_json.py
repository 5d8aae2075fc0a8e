"""Stored JSON (engine.stores.dialect.to_json / from_json): what json.dumps accepted, read back exactly."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.stores.dialect import from_json, to_json

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_values_round_trip_exactly_and_read_as_json_reads_them(value):
    text = to_json(value)
    assert from_json(text) == value
    assert json.loads(text) == value  # standard JSON: any reader gets the same values


def test_key_order_non_ascii_and_int_keys_as_json_writes_them():
    value = {"z": 1, "a": "café 咖啡", 3: [0.1, 1e-05, 2.5e20]}
    text = to_json(value)
    assert "café 咖啡" in text
    assert list(from_json(text)) == ["z", "a", "3"]
    assert from_json(text) == json.loads(json.dumps(value))


def test_numpy_numbers_are_plain_numbers():
    assert from_json(to_json({"s": np.float64(0.25), "f": np.float32(0.5), "n": np.int64(7)})) == {
        "s": 0.25, "f": 0.5, "n": 7}


@pytest.mark.parametrize("value", [datetime(2026, 1, 1, tzinfo=UTC), {1, 2}, object()])
def test_what_json_refuses_is_refused(value):
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        to_json({"x": value})


def test_a_dataclass_is_refused_as_json_refuses_it():
    @dataclass
    class Point:
        x: int

    with pytest.raises(TypeError):
        to_json(Point(1))


def test_non_finite_floats_are_written_as_null():
    assert from_json(to_json([math.nan, math.inf, 1.0])) == [None, None, 1.0]


def test_text_written_by_earlier_versions_reads_back():
    # json.dumps wrote spaces after separators, NaN for a non-finite float, and any integer
    assert from_json('{"a": [1, 2.5], "b": NaN}')["a"] == [1, 2.5]
    assert math.isnan(from_json('{"b": NaN}')["b"])
    assert from_json(str(2**70)) == 2**70


def test_malformed_text_is_a_json_error():
    with pytest.raises(json.JSONDecodeError):
        from_json('{"a": ')
