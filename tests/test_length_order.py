"""When the first out-of-memory comes, in each order: worked out by hand on small cases."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from calculator.memory.length_order import ORDERS, ordered, padded_batches, sample_lengths, simulate


def test_lengths_have_the_median_and_longest_asked():
    lengths = sample_lengths(10_001, 400, 6000)
    assert len(lengths) == 10_001
    assert sorted(lengths)[5000] == 400 and max(lengths) == 6000 and min(lengths) >= 1
    assert lengths == sample_lengths(10_001, 400, 6000)  # quantiles, not draws: the same link, the same lengths


def test_batches_are_padded_to_their_longest_sample():
    assert padded_batches([3, 9, 2, 2, 7], 2) == [9, 2, 7]


def test_first_out_of_memory_by_hand():
    runs = {r.order: r for r in simulate(list(range(1, 11)), 2, 7, seconds_for=float)}
    shortest = runs["shortest_first"]
    assert shortest.padded == (2, 4, 6, 8, 10)
    assert shortest.ends == (2.0, 6.0, 12.0, 20.0, 30.0)  # a batch takes as many seconds as its length
    assert shortest.first_oom == 3 and shortest.seconds_before_oom == 12.0
    longest = runs["longest_first"]
    assert longest.padded == (10, 8, 6, 4, 2) and longest.first_oom == 0 and longest.seconds_before_oom == 0.0
    shuffled = runs["shuffled"]
    assert max(shuffled.padded[:shuffled.first_oom], default=0) <= 7 < shuffled.padded[shuffled.first_oom]


def test_nothing_fails_when_the_longest_fits():
    assert all(r.first_oom is None and r.seconds_before_oom is None
               for r in simulate([5, 1, 3], 2, 5, seconds_for=float))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=300), st.integers(1, 16), st.integers(1, 5000))
def test_longest_first_never_fails_later_than_another_order(lengths, batch, limit):
    runs = {r.order: r for r in simulate(lengths, batch, limit, seconds_for=lambda t: t / 1000)}
    fails = [r.first_oom is not None for r in runs.values()]
    assert all(fails) or not any(fails)  # whether it fails does not depend on the order
    if all(fails):
        assert runs["longest_first"].first_oom == 0 and runs["longest_first"].seconds_before_oom == 0.0
        # sorted shortest first, every batch of fitting samples comes before the first that fails
        fitting = sum(1 for t in lengths if t <= limit)
        assert runs["shortest_first"].first_oom == fitting // batch
    assert sorted(ordered(lengths, "shuffled")) == sorted(lengths) and set(runs) == set(ORDERS)


def test_the_kept_lengths_are_not_shared_with_a_caller():
    """sample_lengths keeps its last answers (a case change reruns the page on the same lengths):
    a caller that changes its list does not change the next answer."""
    first = sample_lengths(1000, 400, 6000)
    expected = list(first)
    first.sort(reverse=True)
    first[0] = -1
    assert sample_lengths(1000, 400, 6000) == expected
