"""When does the first out-of-memory come? Samples of varied length, batched in three orders.

A batch is padded to its longest sample, so its memory follows that sample. Whether a run
fails does not depend on the order (the longest sample is somewhere); when it fails does:
in the dataset's own order it can be hours in, longest first it is the very first batch.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import lru_cache
import math
import random
from statistics import NormalDist
from collections.abc import Callable

from calculator.core.gpus import Gpu
from calculator.core.memo import kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.models.summary import ModelSummary

ORDERS = ("shuffled", "shortest_first", "longest_first")
MAX_SAMPLES = 200_000


@dataclass(frozen=True)
class OrderRun:
    order: str
    padded: tuple[int, ...]  # each batch's padded length, in processing order
    ends: tuple[float, ...]  # seconds elapsed when each batch is done
    first_oom: int | None  # index of the first batch longer than the limit

    @property
    def seconds_before_oom(self) -> float | None:
        if self.first_oom is None:
            return None
        return self.ends[self.first_oom - 1] if self.first_oom else 0.0

    @property
    def total_seconds(self) -> float:
        return self.ends[-1] if self.ends else 0.0


def sample_lengths(count: int, median: int, longest: int) -> list[int]:
    """`count` lengths spread like real text: log-normal, with the given median, the longest
    exactly `longest`. Quantiles rather than random draws, so the same inputs give the same
    lengths."""
    return list(_quantile_lengths(max(1, min(count, MAX_SAMPLES)), median, longest))


@lru_cache(maxsize=4)  # a case change reruns the page on the same lengths: at most 4 x 800 kB kept
def _quantile_lengths(count: int, median: int, longest: int) -> array:
    median = max(1, min(median, longest))
    quantile = NormalDist().inv_cdf
    top = quantile((count - 0.5) / count) if count > 1 else 1.0
    sigma = math.log(longest / median) / top if top > 0 else 0.0
    return array("l", (max(1, min(longest, round(median * math.exp(sigma * quantile((i + 0.5) / count)))))
                       for i in range(count)))


def ordered(lengths: list[int], order: str, seed: int = 0) -> list[int]:
    if order == "longest_first":
        return sorted(lengths, reverse=True)
    if order == "shortest_first":
        return sorted(lengths)
    shuffled = list(lengths)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def padded_batches(lengths: list[int], batch: int) -> list[int]:
    return [max(lengths[i:i + batch]) for i in range(0, len(lengths), batch)]


def simulate(lengths: list[int], batch: int, limit: int, seconds_for: Callable[[int], float]) -> list[OrderRun]:
    """Each order's batches, the time each ends, and the first batch whose padded length
    passes `limit` (the longest context that fits at this batch size)."""
    return _runs({order: padded_batches(ordered(lengths, order), batch) for order in ORDERS}, limit, seconds_for)


def simulate_sampled(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, count: int,
                     median: int, longest: int, limit: int) -> tuple[OrderRun, ...]:
    """`simulate` on sample_lengths(count, median, longest), each batch timed by its prefill
    on the card; kept by its inputs when it is not too large (a case change reruns the page
    with the same ones)."""
    count = max(1, min(count, MAX_SAMPLES))
    run = _sampled if -(-count // batch) > KEPT_BATCHES else _kept_sampled
    return run(summary, spec, gpu, dtype, batch, count, median, longest, limit)


def _sampled(summary, spec, gpu, dtype, batch, count, median, longest, limit) -> tuple[OrderRun, ...]:
    from calculator.memory.speed import prefill

    batches = {order: padded_batches(list(lengths), batch) for order, lengths in _orders(count, median, longest)}
    return tuple(_runs(batches, limit, lambda t: prefill(summary, spec, gpu, dtype, batch, t).seconds))


# A kept run holds each order's batches as Python numbers (~190 bytes a batch for the three,
# measured with tracemalloc):
# runs of at most KEPT_BATCHES batches are kept, two at most (~22 MB).
KEPT_BATCHES = 60_000
_kept_sampled = kept_by_inputs(maxsize=2)(_sampled)


@lru_cache(maxsize=2)  # the orders do not depend on the batch: a batch change sorts nothing again
def _orders(count: int, median: int, longest: int) -> tuple[tuple[str, array], ...]:
    lengths = list(_quantile_lengths(count, median, longest))
    return tuple((order, array("l", ordered(lengths, order))) for order in ORDERS)


def _runs(batches: dict[str, list[int]], limit: int, seconds_for: Callable[[int], float]) -> list[OrderRun]:
    cache: dict[int, float] = {}
    runs = []
    for order, padded in batches.items():
        ends, elapsed = [], 0.0
        for length in padded:
            if length not in cache:
                cache[length] = seconds_for(length)
            elapsed += cache[length]
            ends.append(elapsed)
        first = next((i for i, length in enumerate(padded) if length > limit), None)
        runs.append(OrderRun(order, tuple(padded), tuple(ends), first))
    return runs
