"""A predicted peak read three ways, and the verdict against what the card really gives.

The calculator predicts what `torch.cuda.max_memory_allocated()` reports: the bytes of live
tensors at the peak. Two more readings matter on a real card (DESIGN.md, "Units and verdicts"):

- reserved (`torch.cuda.max_memory_reserved()`): the caching allocator hands out blocks
  rounded to 512 bytes, asks CUDA for segments of 2 MiB (requests up to 1 MiB), 20 MiB (up to
  10 MiB) or the request rounded up to 2 MiB, and keeps freed blocks for reuse; blocks of
  different segments never merge, so memory that is allocated and freed during a run
  (activations, a cache that grows, gradients) leaves gaps (c10/cuda/CUDACachingAllocator.cpp:
  kMinBlockSize, kSmallSize, kSmallBuffer, kLargeBuffer, kMinLargeAlloc, kRoundLarge).
- what nvidia-smi shows for the process: reserved plus the CUDA context and kernels, which
  live outside the allocator (calculator/core/cuda_context.py, calibrated by architecture from published
  out-of-memory messages).

A verdict compares the reserved peak with the memory the process can use (the total PyTorch
is told, less the context) minus a stated headroom: "fits" below it, "tight" inside it (it
may run, or fail on fragmentation or a kernel's workspace), "too_big" above the usable memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.core.units import MIB
from calculator.core.gpus import Gpu

BLOCK_BYTES = 512  # kMinBlockSize: every block is rounded up to it
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc: smaller requests share 2 MiB or 20 MiB segments...
ROUND_LARGE_BYTES = 2 * MIB  # kRoundLarge: ...larger ones get a segment rounded up to 2 MiB
# Reserve kept for what comes and goes during a run, beyond the largest moment: an allowance,
# not a measurement. Freed blocks of one size cannot serve a larger request from another
# segment; PyTorch's own worked example ends with twice the memory reserved (pytorch/devlogs,
# "When does fragmentation occur in the CUDA caching allocator?", 2026-06-01), while steady
# inference measured 0.9% above the allocated peak (Llama-2-7b, batch 1, A100: 14,480 against
# 14,356 MB, optimum-benchmark running-llamas). 10% of the moving part sits between the two.
FRAGMENTATION_SHARE = 0.10
# The margin a verdict keeps below the usable memory: kernel workspaces (cuBLAS, attention)
# and fragmentation beyond the allowance. The oom chapter advises keeping 5 to 10% free. It also
# covers the spread of the CUDA context across published messages (upper quartile − median:
# 98 MiB over all of them, 32 MiB on Ada, 116 MiB on Ampere): 5% of the smallest catalog card's
# usable memory (a T4, 14.43 GiB) is 739 MiB, more than seven times that. `Budget.context_spread_bytes` says
# what the spread is worth on each card.
HEADROOM_SHARE = 0.05

FITS, TIGHT, TOO_BIG = "fits", "tight", "too_big"
VERDICTS = (FITS, TIGHT, TOO_BIG)


def rounding_bytes(sizes) -> int:
    """Bytes the allocator adds to tensors of these sizes, each its own allocation: from
    10 MiB on, a segment of its own rounded up to 2 MiB; below, a block rounded up to 512
    bytes inside a segment it shares (2 MiB up to 1 MiB, 20 MiB up to 10 MiB)."""
    waste = 0
    for size in sizes:
        unit = ROUND_LARGE_BYTES if size >= MIN_LARGE_ALLOC else BLOCK_BYTES
        waste += -size % unit
    return waste


def reserved_bytes(allocated: int, steady: int = 0, rounding: int = 0) -> int:
    """What max_memory_reserved would show for an allocated peak, `steady` bytes of which are
    held from start to end (weights, optimizer states), with the allocator's `rounding` of the
    long-lived tensors; what comes and goes gets FRAGMENTATION_SHARE on top."""
    steady = min(max(steady, 0), allocated)
    return allocated + max(rounding, 0) + math.ceil((allocated - steady) * FRAGMENTATION_SHARE)


@dataclass(frozen=True)
class Readings:
    """One peak, three readings, and the verdict on a card (None without a card)."""

    allocated_bytes: int  # torch.cuda.max_memory_allocated()
    reserved_bytes: int  # torch.cuda.max_memory_reserved()
    nvidia_smi_bytes: int  # reserved + the CUDA context
    usable_bytes: int | None = None
    headroom_bytes: int | None = None
    verdict: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """What one process may use on a card, and how a predicted peak reads against it."""

    card: Gpu
    headroom_share: float = HEADROOM_SHARE

    @property
    def usable_bytes(self) -> int:
        return self.card.usable_bytes

    @property
    def headroom_bytes(self) -> int:
        return math.ceil(self.usable_bytes * self.headroom_share)

    @property
    def context_spread_bytes(self) -> int:
        """How much of the headroom the CUDA context's spread alone takes on this card."""
        from calculator.core.cuda_context import context_for

        return context_for(self.card.architecture).spread_bytes

    @property
    def limit_bytes(self) -> int:
        """The largest reserved peak that "fits"."""
        return self.usable_bytes - self.headroom_bytes

    def verdict_for(self, reserved: int) -> str:
        if reserved <= self.limit_bytes:
            return FITS
        return TIGHT if reserved <= self.usable_bytes else TOO_BIG

    def readings(self, allocated: int, steady: int = 0, rounding: int = 0) -> Readings:
        reserved = reserved_bytes(allocated, steady, rounding)
        return Readings(allocated, reserved, reserved + self.card.context_bytes, self.usable_bytes,
                        self.headroom_bytes, self.verdict_for(reserved))

    def admits(self, memory, tight: bool = False) -> bool:
        """Whether a predicted memory (an object with total_bytes and, optionally,
        steady_bytes and rounding_bytes) fits; tight=True accepts the headroom too."""
        reserved = reserved_bytes(memory.total_bytes, getattr(memory, "steady_bytes", 0),
                                  getattr(memory, "rounding_bytes", 0))
        return reserved <= (self.usable_bytes if tight else self.limit_bytes)


def readings_of(memory, budget: Budget | None = None, context: int | None = None) -> Readings:
    """The three readings of a predicted memory (total_bytes, steady_bytes, rounding_bytes),
    with the verdict when a card's budget is given. Without a card, nvidia-smi's reading uses
    `context` (default: the calibrated figure of an architecture without its own, cuda_context.py)."""
    allocated = memory.total_bytes
    steady, rounding = getattr(memory, "steady_bytes", 0), getattr(memory, "rounding_bytes", 0)
    if budget is not None:
        return budget.readings(allocated, steady, rounding)
    from calculator.core.cuda_context import context_for

    reserved = reserved_bytes(allocated, steady, rounding)
    return Readings(allocated, reserved, reserved + (context_for(None).bytes if context is None else context))


def admits(capacity, memory, tight: bool = False) -> bool:
    """A Budget's verdict, or, for a plain byte count, the bare comparison of the allocated peak."""
    if isinstance(capacity, Budget):
        return capacity.admits(memory, tight)
    return memory.total_bytes <= capacity
