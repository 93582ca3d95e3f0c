"""The memory a PyTorch process holds outside its caching allocator, by GPU architecture: its
CUDA context, the kernels it loaded (cuBLAS, attention) and libraries' workspaces. nvidia-smi
counts it; torch.cuda.memory_reserved() does not; a card's usable memory is the total PyTorch
is told less this.

Calibrated from published out-of-memory messages (bench/data/oom_messages.json, 48 messages from
public issues): those that say what this process uses give it directly, in use − allocated −
reserved but unallocated. Only single-script runs on PyTorch 2.1 and later count (older messages
give no per-process figure; a rank of a multi-GPU job also holds NCCL buffers). `python -m bench
cuda_context` recomputes MEASURED from the messages, and a test keeps the two equal.

An architecture with at least MIN_MESSAGES readings uses its own median; any other architecture
string (volta, blackwell, cdna3, apple, one a later card list adds) falls back to the median of
all readings, said so in `ContextFigure.source`. The spread (upper quartile − median) is what a
verdict's headroom must cover for the context alone (calculator/core/budget.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

MIN_MESSAGES = 3
# architecture: (messages, median, lower quartile, upper quartile, smallest, largest), in bytes
MEASURED = {
    "ada": (7, 495703819, 443128218, 529646223, 246960620, 2312340767),
    "all": (23, 436322959, 258348155, 539256422, 141715047, 4166118277),
    "ampere": (4, 331601674, 231019642, 452817060, 220284846, 525451919),
    "blackwell": (1, 623892234, 623892234, 623892234, 623892234, 623892234),
    "pascal": (1, 317739499, 317739499, 317739499, 317739499, 317739499),
    "turing": (3, 143193539, 142454293, 145322148, 141715047, 147450757),
    "volta": (1, 1028034396, 1028034396, 1028034396, 1028034396, 1028034396),
}
FALLBACK = "all"


@dataclass(frozen=True)
class ContextFigure:
    """The memory outside PyTorch one process of an architecture holds, and how well it is known."""

    architecture: str
    bytes: int  # the median of the readings used
    lower_quartile: int
    upper_quartile: int
    messages: int
    source: str  # "measured": this architecture's own messages; "fallback": every message's

    @property
    def spread_bytes(self) -> int:
        """How far above the median a quarter of processes go: the margin the context alone asks."""
        return self.upper_quartile - self.bytes


def context_for(architecture: object) -> ContextFigure:
    """The calibrated figure for an architecture; any unknown or thin one gets the fallback."""
    return _context_for_key(str(architecture).strip().lower()[:80] if architecture is not None else "")


@lru_cache(maxsize=64)  # every card's usable memory asks it, hundreds of times a page
def _context_for_key(key: str) -> ContextFigure:
    own = MEASURED.get(key) if key != FALLBACK else None
    if own is not None and own[0] >= MIN_MESSAGES:
        messages, median, q1, q3, _, _ = own
        return ContextFigure(key, median, q1, q3, messages, "measured")
    messages, median, q1, q3, _, _ = MEASURED[FALLBACK]
    return ContextFigure(key, median, q1, q3, messages, "fallback")
