"""QLoRA's quantized base (NF4) and the largest single module (DeepSpeed's stage 3)."""

from __future__ import annotations

import math

from calculator.models.architecture import ArchSpec
from calculator.memory.quantization import is_router
from calculator.models.summary import ModelSummary
from calculator.training.setup import _layer_count

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


def nf4_parameters(summary: ModelSummary, spec: ArchSpec | None = None) -> tuple:
    """The matrices bitsandbytes converts in transformers 5: nn.Linear layers only. The output
    head stays in 16 bits, and so do a mixture of experts' fused 3-D expert tensors and its
    router (Qwen3-MoE, Mixtral, gpt-oss...: parameters of their own modules, not nn.Linear;
    integrations/bitsandbytes.py replaces `type(module) is nn.Linear`)."""
    return tuple(m for m in summary.linears
                 if m.kind == "linear" and not (spec is not None and is_router(m, spec)))


def unconverted_expert_parameters(summary: ModelSummary, spec: ArchSpec | None = None) -> int:
    """Expert and router parameters a 4-bit or 8-bit bitsandbytes load leaves in 16 bits, and
    that peft's prepare_model_for_kbit_training then casts to float32 with the norms."""
    if not summary.groups.get("experts"):
        return 0
    routers = sum(m.parameters for m in summary.linears if spec is not None and is_router(m, spec))
    return summary.groups["experts"] + routers


def quantized_base_bytes(summary: ModelSummary, keep_bytes: int, double_quant: bool = True,
                         spec: ArchSpec | None = None) -> int:
    """QLoRA's frozen base: the nn.Linear matrices in NF4; embeddings, norms, biases, the head
    and a mixture of experts' fused experts and router at `keep_bytes` per parameter (4 after
    prepare_model_for_kbit_training, which casts every parameter that is not 8-bit or 4-bit to
    float32: about 116 GB for Qwen3-30B-A3B's 29B expert parameters)."""
    quantized = nf4_parameters(summary, spec)
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


def kbit_upcast_bytes(summary: ModelSummary, spec: ArchSpec | None, setup) -> int:
    """What prepare_model_for_kbit_training adds to QLoRA's frozen base by casting the expert
    tensors bitsandbytes left in 16 bits to float32 (2 more bytes each): the answer behind the
    mixture-of-experts warning. 0 for a dense model, LoRA, or a run that skips the preparation."""
    if setup.method != "qlora" or not setup.kbit_prepare:
        return 0
    return 2 * unconverted_expert_parameters(summary, spec)
