"""QLoRA's quantized base (NF4) and the largest single module (DeepSpeed's stage 3)."""

from __future__ import annotations

import math

from ..architecture import ArchSpec
from ..summary import ModelSummary
from .setup import _layer_count

# NF4 (QLoRA): two weights per byte, one float32 scale per block of 64; with double
# quantization the scales are stored in 8 bits, in blocks of 256 with a float32 scale each
# (Dettmers et al., "QLoRA", 2023: 0.5 bits per parameter become 0.127).
NF4_BLOCK = 64
NF4_SCALE_BLOCK = 256


# Quantized base (QLoRA) --------------------------------------------------------------------

def nf4_bytes(rows: int, cols: int, double_quant: bool = True) -> int:
    """One matrix in bitsandbytes' NF4: packed values plus its quantization constants."""
    numel = rows * cols
    blocks = math.ceil(numel / NF4_BLOCK)
    constants = blocks * 4
    if double_quant:  # 8-bit scales, a float32 scale per 256 of them, and their mean
        constants = blocks + 4 * math.ceil(blocks / NF4_SCALE_BLOCK) + 4
    return math.ceil(numel / 2) + constants


def quantized_base_bytes(summary: ModelSummary, keep_bytes: int, double_quant: bool = True) -> int:
    """QLoRA's frozen base: the layers' matrices in NF4 (transformers keeps the output head
    in 16 bits); embeddings, norms, biases and the head at `keep_bytes` per parameter."""
    quantized = [m for m in summary.linears if m.kind in ("linear", "experts")]
    nf4 = sum(m.count * nf4_bytes(m.out_features, m.in_features, double_quant) for m in quantized)
    kept = summary.parameters - sum(m.parameters for m in quantized)
    return nf4 + kept * keep_bytes


def largest_module_parameters(summary: ModelSummary, spec: ArchSpec) -> int:
    """Parameters of the largest single module, as DeepSpeed's estimator counts them (the
    parameters a module holds itself): a weight matrix, an embedding, or one layer's fused
    experts (transformers keeps all the experts of a layer in one module)."""
    sizes = [m.in_features * m.out_features for m in summary.linears if m.kind != "experts"]
    experts = sum(m.parameters for m in summary.linears if m.kind == "experts")
    if experts:
        sizes.append(math.ceil(experts / _layer_count(spec)))
    sizes += [u.parameters for u in summary.units if not u.name.split(".")[-1].isdigit()]
    return max(sizes or [summary.parameters])
