"""SGLang's accounting: the free memory it measures before the weights, its default
--mem-fraction-static, and the bytes one token of its pool costs.

Two versions, read in their source:
- the current one (SGLANG_CURRENT, the default), sgl-project/sglang main at commit 031ed82:
  python/sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings (the default fraction,
  chunked prefill size and decode CUDA graph batch size by the card's memory, the 20-35 GiB
  rung as PR #37898 raised it in September 2026; the 0.5.21 wheel carries it) and
  reserve_for_graph_mb; arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes;
  model_executor/cuda_graph_config.py (decode graphs "full", prefill graphs "breakable" on
  CUDA by default); model_executor/pool_configurator.py (tokens = available bytes // bytes per
  token, page-aligned; hybrid sliding-window models pay swa_full_tokens_ratio = 0.8 of a
  sliding layer per token); environ.py SGLANG_ENABLE_POST_CAPTURE_KV_SIZING off by default;
  utils get_nvgpu_memory_capacity (nvidia-smi's memory.total in MiB).
- 0.4.6.post5, the release of the published logs bench/data/serving_logs.json compares against.
In both, weights + pool = fraction x the free memory measured before the weights are loaded
(model_runner.py profile_max_num_token / profile_available_bytes: rest = free after the
weights - free at start x (1 - fraction)).
"""

from __future__ import annotations

import math

from calculator.core.units import MIB, GIB

SGLANG_CURRENT = "0.5.21"
SGLANG_LEGACY = "0.4.6"
SGLANG_VERSIONS = (SGLANG_CURRENT, SGLANG_LEGACY)
SGLANG_VERSION = SGLANG_CURRENT
# - SGLang measures the free memory once CUDA and NCCL are up, before the weights: the card's
#   total less about 0.4 GiB (78.81 of 79.19 GiB on an H100, 21.63 of 22.04 GiB on an L4).
SGLANG_START_BYTES = round(0.4 * GIB)
SWA_FULL_TOKENS_RATIO = 0.8  # server_args swa_full_tokens_ratio: the sliding layers' pool per full token

# memory_hook.py's rungs on the card's memory (nvidia-smi, MiB): below this much,
# (chunked_prefill_size, decode CUDA graph max batch below TP4, at TP4 and more)
RUNGS = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
         (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (math.inf, 16384, 512, 512))


def sglang_defaults(memory_bytes: int, tensor: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA graph max batch) SGLang picks on this card when none
    is given (current version)."""
    mib = memory_bytes / MIB
    _, chunked, small_tp, large_tp = next(rung for rung in RUNGS if mib < rung[0])
    return chunked, (small_tp if tensor < 4 else large_tp)


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures prefill CUDA graphs for, up to max_tokens
    (cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def sglang_reserved_mib(memory_bytes: int, tensor: int, mla: bool = False, chunked: int | None = None) -> float:
    """What the current default fraction leaves out of the card, in MiB: a constant 512, 1.5 per
    token of a chunked prefill (the card's default, or --chunked-prefill-size), 1 GiB per 8 GPUs
    of one model, 2 per decode graph batch, and 8 per prefill graph, captured up to the chunk
    (MLA: 1.5 GiB flat); at least 10 GiB on cards above 60 GiB."""
    default_chunk, decode_bs = sglang_defaults(memory_bytes, tensor)
    chunked = chunked or default_chunk
    reserved = 512 + max(chunked, 2048) * 1.5 + tensor / 8 * 1024 + decode_bs * 2
    reserved += 1.5 * 1024 if mla else len(prefill_graph_sizes(chunked)) * 8
    if memory_bytes / MIB > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return reserved


def vision_factor(config: dict | None) -> float:
    """memory_hook.adjust_mem_fraction_for_vlm: a model with a vision tower gets 0.95 of the
    fraction, less 10% for each doubling of the tower's layers x width squared over ViT-L/14's
    (24 x 1024^2), within 0.8 to 1.05 of that."""
    vision = (config or {}).get("vision_config")
    if not isinstance(vision, dict):
        return 1.0
    layers = vision.get("num_hidden_layers") or vision.get("depth") or 24
    width = vision.get("hidden_size") or 1024
    ratio = int(layers) * int(width) ** 2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def sglang_fraction(memory_bytes: int, tensor: int, version: str = SGLANG_CURRENT, mla: bool = False,
                    config: dict | None = None, chunked: int | None = None) -> float:
    """SGLang's default --mem-fraction-static, from the card's memory as nvidia-smi reports it
    and the number of GPUs of one model."""
    if version == SGLANG_LEGACY:
        return legacy_fraction(memory_bytes, tensor)
    mib = memory_bytes / MIB
    fraction = round((mib - sglang_reserved_mib(memory_bytes, tensor, mla, chunked)) / mib, 3)
    factor = vision_factor(config)
    return fraction if factor == 1.0 else fraction * factor


def legacy_fraction(memory_bytes: int, tensor: int) -> float:
    """SGLang 0.4.6's default --mem-fraction-static (server_args.py): a table on the TP size up
    to 80 GiB, then a larger share on larger cards."""
    gib = memory_bytes / GIB
    if gib <= 80:
        fraction = next(f for at_least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
                        if tensor >= at_least)
    else:
        fraction = 0.88
    if gib > 96:
        fraction = min(fraction + 48 * (1 - fraction) / gib, (gib - 18) / gib)
    return round(fraction, 4)


def pool_cell_bytes(full_bytes: int, sliding_bytes: int, version: str = SGLANG_CURRENT) -> float:
    """Bytes of the pool per token of max_total_num_tokens on one GPU. 0.4.6 and models with one
    kind of layer: every layer's key and value. Current version, models mixing full and
    sliding-window layers: the sliding layers' pool holds 0.8 tokens per full-layer token
    (HybridSWAPoolConfigurator)."""
    if version == SGLANG_LEGACY or not full_bytes or not sliding_bytes:
        return full_bytes + sliding_bytes
    return full_bytes + SWA_FULL_TOKENS_RATIO * sliding_bytes
