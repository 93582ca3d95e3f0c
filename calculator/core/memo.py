"""Answers kept by their inputs, for a page that asks the same ones again on every rerun.

A case change reruns the whole chapter: each calculator asks the engine for the same peaks
(a largest-batch search alone asks for ~20), hundreds of times a page. The engine's results
are frozen dataclasses, so a kept result can be handed to every session as it is.

A model's count (ModelSummary) holds a dict, so it cannot be hashed; the model seam hands out
one object per model and keeps it, so it is keyed by identity (`Same`), which also holds it:
its id cannot be reused while the entry lives.

A result that holds a dict (the training peak's components) holds a `FrozenDict`: a dict that
reads, compares and writes to JSON as one, and that nothing can change.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps


class Same:
    """A cache key that compares an object by identity and keeps it alive."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value


class FrozenDict(dict):
    """A dict that cannot be changed after it is made, so a kept result holding it can be
    shared between sessions (and hashed)."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("a kept result's mapping cannot be changed")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def __reduce__(self):  # copy and pickle through the constructor, not item by item
        return (type(self), (dict(self),))


# Every function kept by its inputs, so a test that changes what the engine computes (a patched
# constant or class) can forget every kept answer at once (`forget_kept`).
_KEPT: list[Callable] = []


def forget_kept() -> None:
    """Empty every `kept_by_inputs` cache."""
    for kept in _KEPT:
        kept.cache_clear()


def kept_by_inputs(maxsize: int) -> Callable:
    """Keep the last `maxsize` results of a pure function whose first argument is a model's
    count (keyed by identity) and whose other arguments are hashable; a call with an
    unhashable argument is computed, not kept. The function must return an immutable value."""
    def decorate(function: Callable) -> Callable:
        @lru_cache(maxsize=maxsize)
        def kept(first: Same, *args, **options):
            return function(first.value, *args, **options)

        @wraps(function)
        def call(first, *args, **options):
            try:
                hash((args, tuple(options.items())))
            except TypeError:
                return function(first, *args, **options)
            return kept(Same(first), *args, **options)

        call.cache_info, call.cache_clear = kept.cache_info, kept.cache_clear
        _KEPT.append(kept)
        return call
    return decorate
