"""SGLang's accounting: the free memory it measures before the weights, and its default
--mem-fraction-static. Sources: see engines.py's docstring.
"""

from __future__ import annotations

from calculator.serving.engines import GIB

SGLANG_VERSION = "0.4.6"
# - SGLang measures the free memory once CUDA and NCCL are up, before the weights: the card's
#   total less about 0.4 GiB (78.81 of 79.19 GiB on an H100, 21.63 of 22.04 GiB on an L4).
SGLANG_START_BYTES = round(0.4 * GIB)


def sglang_fraction(memory_bytes: int, tensor: int) -> float:
    """SGLang 0.4.6's default --mem-fraction-static (server_args.py), from the card's memory as
    nvidia-smi reports it and the number of GPUs of one model."""
    gib = memory_bytes / GIB
    if gib <= 80:
        fraction = next(f for at_least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
                        if tensor >= at_least)
    else:
        fraction = 0.88
    if gib > 96:
        fraction = min(fraction + 48 * (1 - fraction) / gib, (gib - 18) / gib)
    return round(fraction, 4)
