"""The one binary search (calculator/core/search.py) against a plain scan."""

from __future__ import annotations

from hypothesis import given, strategies as hs

from calculator.core.search import first_where, largest_fitting


def test_first_where_returns_the_first_item_that_holds_with_its_value():
    assert first_where([1, 2, 4, 8, 16], lambda n: n * 10, lambda value: value >= 40) == (4, 40)
    assert first_where([1, 2, 4], lambda n: n, lambda value: value > 100) is None
    assert first_where([], lambda n: n, lambda value: True) is None


@given(hs.lists(hs.integers(0, 1000), max_size=60).map(sorted), hs.integers(-5, 1005))
def test_first_where_equals_a_scan(items, threshold):
    asked = []

    def value_of(n):
        asked.append(n)
        return n

    expected = next((n for n in items if n >= threshold), None)
    found = first_where(items, value_of, lambda value: value >= threshold)
    assert (found[0] if found else None) == expected
    assert len(asked) <= max(len(items), 1).bit_length()  # a binary search, not a scan


@given(hs.integers(1, 500), hs.integers(0, 600), hs.integers(1, 7))
def test_largest_fitting_equals_a_scan(high, capacity, step):
    total_for = lambda n: step * n  # noqa: E731
    expected = max((n for n in range(1, high + 1) if total_for(n) <= capacity), default=0)
    assert largest_fitting(capacity, total_for, high) == expected
