"""The binary searches behind the inverse questions: the largest batch or context that fits,
the largest micro-batch, the fewest GPUs.

Both ask a monotone question: memory grows with the batch, and shrinks (or stays) as GPUs
are added. `first_where` is the one search; `largest_fitting` asks it for the first size
that no longer fits.
"""

from __future__ import annotations

from typing import TypeVar
from collections.abc import Callable, Sequence

Item = TypeVar("Item")
Value = TypeVar("Value")


def first_where(items: Sequence[Item], value_of: Callable[[Item], Value],
                holds: Callable[[Value], bool]) -> tuple[Item, Value] | None:
    """The first item whose value holds, with that value (None if none does). `holds` must be
    false, then true along `items`, so a binary search: about log2(len(items)) values."""
    low, high, found = 0, len(items) - 1, None
    while low <= high:
        middle = (low + high) // 2
        value = value_of(items[middle])
        if holds(value):
            found, high = (items[middle], value), middle - 1
        else:
            low = middle + 1
    return found


def fits(capacity, memory) -> bool:
    """Whether a memory fits a capacity. `capacity`: a byte count (the allocated peak against
    it) or a budget.Budget (the reserved peak against a card's usable memory less its
    headroom). `memory`: a byte count or a result with total_bytes (and steady_bytes,
    rounding_bytes, which the allocator's reserve depends on)."""
    from calculator.core.budget import admits

    if isinstance(memory, int):
        return memory <= capacity if isinstance(capacity, int) else admits(capacity, _Bytes(memory))
    return admits(capacity, memory)


class _Bytes:
    """A bare byte count read as a memory: nothing known to stay from start to end."""

    def __init__(self, total: int) -> None:
        self.total_bytes = total


def largest_fitting(capacity, total_for: Callable[[int], object], high: int) -> int:
    """The largest n in 1..high whose memory fits the capacity (0 if none): the memory grows
    with n, so the first n past 1 that no longer fits, less one."""
    if not fits(capacity, total_for(1)):
        return 0
    too_big = first_where(range(2, high + 1), total_for, lambda memory: not fits(capacity, memory))
    return high if too_big is None else too_big[0] - 1
