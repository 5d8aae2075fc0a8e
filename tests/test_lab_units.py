"""The lab's one duration unit: format_seconds / parse_seconds (pure, no Streamlit run)."""

from __future__ import annotations

import pytest

from lab.ui import format_seconds, parse_seconds


@pytest.mark.parametrize(("seconds", "shown"), [
    (43200, "12 h"), (1800, "30 min"), (259200, "3 d"), (90, "1.5 min"), (45, "45 s"), (0, "0 s"),
    (5400, "1.5 h"), (90000, "1.04 d"), (604800, "7 d"), (-3600, "-1 h"),
])
def test_format_seconds_uses_the_largest_unit(seconds, shown):
    assert format_seconds(seconds) == shown


@pytest.mark.parametrize(("text", "seconds"), [
    ("12h", 43200), ("30m", 1800), ("3d", 259200), ("90s", 90), ("90", 90), ("1.5", 1.5),
    ("12 h", 43200), ("30 min", 1800), ("1h30m", 5400), ("1.5 h", 5400), ("2 days", 172800), ("1w", 604800),
    (" 3D ", 259200), (".5h", 1800), (120, 120), (2.5, 2.5),
])
def test_parse_seconds_reads_units_and_plain_seconds(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "   ", "abc", "12x", "h", "-5", "1h 30", "nan", "1e5", "12 parsecs", True])
def test_parse_seconds_rejects_garbage_clearly(text):
    with pytest.raises(ValueError, match=r"duration|unit"):
        parse_seconds(text)


@pytest.mark.parametrize("seconds", [43200, 1800, 259200, 90, 90000, 870, 0.5, 12.3456, 1e7, 259201, 3 * 3600 + 7])
def test_exact_form_reads_back_without_loss(seconds):
    text = format_seconds(seconds, exact=True)
    assert parse_seconds(text) == pytest.approx(seconds, rel=1e-12)
    assert parse_seconds(format_seconds(seconds)) == pytest.approx(seconds, rel=0.01)  # shown: 3 digits


def test_exact_form_prefers_a_readable_unit():
    assert format_seconds(90000, exact=True) == "25 h"
    assert format_seconds(43200, exact=True) == "12 h"
    assert format_seconds(870, exact=True) == "14.5 min"
