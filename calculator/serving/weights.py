"""Today's weight formats in a serving engine: what `mxfp4`, `nvfp4` and `fp8-block128` weights
take on each GPU under vLLM, which cards run them, and the format a checkpoint is served in
when none is asked for. The plain dtypes, fp8-tensor, GPTQ and AWQ keep engines.py's pricing.

Read from vLLM's source (vllm/model_executor/layers/quantization/):
- mxfp4.py (Mxfp4Config, minimum compute capability 8.0): linear layers load unquantized
  ("MXFP4 linear layer is not implemented - falling back to UnquantizedLinearMethod"), so
  attention, routers, embeddings and the head stay in bfloat16; only fused-MoE experts are
  MXFP4: w13 [E, 2 I', H' / 2] and w2 [E, H', I' / 2] uint8, their E8M0 scales [E, 2 I', H' / 32]
  and [E, H', I' / 32] uint8, and biases w13_bias [E, 2 I'] and w2_bias [E, H'] (bfloat16; the
  Triton backend converts them to float32). I' is the intermediate size per tensor-parallel
  rank and H the hidden size, each rounded up by the backend get_mxfp4_backend picks: Hopper
  (9.0) the Triton kernels, I' to 64; data-centre Blackwell (10.x) FlashInfer, I' and H' to
  256; every other card (Ampere, Ada, the RTX 50 and RTX PRO Blackwell at 12.0) Marlin, I' to
  128 and H' to 256. The reordering for the kernels (swizzle, shuffle) keeps the size; not
  priced: Marlin's own repacking, which we did not follow to the byte.
- modelopt.py (ModelOptNvFp4Config, minimum compute capability 7.5): linear layers and experts
  (not the excluded head, routers or embeddings) as weight [out, in / 2] uint8, weight_scale
  [out, in / 16] float8 E4M3, and float32 weight_scale_2 and input_scale per tensor; Blackwell
  runs them with CUTLASS FP4 kernels, older cards with the FP4 Marlin kernel (W4A16), the
  weights staying 4-bit.
- fp8.py (Fp8Config, minimum compute capability 8.0): block-wise float8 as DeepSeek-V3 ships
  it, weight [out, in] float8 and weight_scale_inv [ceil(out / 128), ceil(in / 128)] float32
  per rank; below 8.9 the Marlin kernel runs the float8 weights as they are (weight-only).
- torchao.py (TorchAOConfig, minimum compute capability 7.5): every LinearBase layer through
  torchao's own tensor subclass (the head is a VocabParallelEmbedding, left in bfloat16); a
  FusedMoE layer only from a per-module config (ModuleFqnToConfig) whose experts are float8,
  so a plain Int4/Int8WeightOnlyConfig checkpoint of a mixture of experts is refused. After
  loading, convert_to_packed_tensor_based_on_current_hardware (pytorch/ao,
  torchao/prototype/tensor_conversion/api.py) preshuffles an Int4Tensor on 9.0 and later,
  which keeps its size. torchao's layouts (quantize_/workflows/, torchao 0.18):
  Int8WeightOnlyConfig is Int8Tensor, int8 [out, in] with a float32 scale and an int8 zero per
  output row (choose_qparams_affine, scale_dtype=float32); Int4WeightOnlyConfig's default
  packing is Int4Tensor, [out, in / 2] bytes with a bfloat16 scale and zero per 128 inputs,
  whose kernels (mslk's bf16i4bf16_rowwise) need 9.0; on 8.x the layout that runs is tinygemm's
  tile_packed_to_4d (Int4TilePackedTo4dTensor, _weight_int4pack_mm needs 8.0), the matrix padded
  to a multiple of 1,024 inputs and 8 outputs before packing, scale and zero per 128 padded
  inputs. Either way a matrix whose inputs (per rank) are not a multiple of 128 is left in
  bfloat16 (quant_api.py, _int4_weight_only_quantize_tensor).
SGLang (sgl-project/sglang, python/sglang/srt/layers/quantization/) runs fp8-block128
(DeepSeek-V3's layout, in every version modelled here) and, in the current version only (0.4.6
predates gpt-oss), mxfp4: mxfp4.py's Mxfp4MoEMethod registers vLLM's shapes (linear layers
unquantized, minimum capability 8.0), I' padded to 32 with the triton_kernels backend that
server_args picks for gpt-oss, and to 256 with H' to 256 on data-centre Blackwell (10.x:
FlashInfer); both backends turn the expert biases to float32. The triton_kernels package is
assumed installed: without it SGLang upcasts the experts to bfloat16 after loading
(upcast_from_mxfp), which is not modelled, nor is its ROCm path (aiter). nvfp4 stays refused
for it: modelopt_quant.py keeps a second, padded copy of each scale matrix
(weight_scale_interleaved, rows to 128 and columns to 4) beside weight_scale, and its NVFP4
experts need Blackwell; that layout is not priced here.
"""

from __future__ import annotations

import math

from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu
from calculator.core.precision import normalize_dtype
from calculator.distributed.parallel import tensor_parallel
from calculator.memory.quantization import (fp8_bytes, is_format, is_router, nvfp4_bytes, quant_format, shipped_format,
                                            torchao_int4_bytes, torchao_int8_bytes)
from calculator.models.architecture import ArchSpec
from calculator.models.summary import ModelSummary
from calculator.serving.auto_dtype import auto_dtype, check_given_dtype, checkpoint_dtype, sglang_auto_dtype
from calculator.serving.sglang import SGLANG_LEGACY

SERVED_FORMATS = ("mxfp4", "nvfp4", "fp8-block128", "torchao-int4", "torchao-int8")  # the others: engines.py
# get_min_capability; torchao-int4: its int4 kernels (tinygemm) need 8.0, above vLLM's 7.5
MIN_CAPABILITY = {"mxfp4": (8, 0), "nvfp4": (7, 5), "fp8-block128": (8, 0), "torchao-int4": (8, 0),
                  "torchao-int8": (7, 5)}
TORCHAO_GROUP = 128  # Int4WeightOnlyConfig's default group size
TINYGEMM_PADDING = (1024, 8)  # (inputs, outputs) multiples of Int4TilePackedTo4dTensor
SGLANG_FORMATS = ("fp8-block128", "mxfp4")
SGLANG_LEGACY_REFUSED = ("mxfp4",)  # formats the legacy version modelled (0.4.6) predates
# Compute capability of each NVIDIA architecture of the card list; Blackwell is 10.x in the
# data centre (B200, B300, GB200) and 12.0 on RTX 50 and RTX PRO cards.
CAPABILITY = {"pascal": (6, 0), "volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "ada": (8, 9),
              "hopper": (9, 0), "blackwell": (12, 0)}
MXFP4_PADDING = {"triton": (64, 1), "flashinfer": (256, 256), "marlin": (128, 256),  # (I', H') multiples
                 "sglang-triton": (32, 1), "sglang-flashinfer": (256, 256)}
MXFP4_BIAS_BYTES = {"triton": 4, "flashinfer": 2, "marlin": 2, "sglang-triton": 4, "sglang-flashinfer": 4}


def capability(card: Gpu) -> tuple[int, int] | None:
    """The card's compute capability, None for a card that is not NVIDIA's (AMD, Apple, typed)."""
    if card.architecture == "blackwell" and card.group == "data-centre":
        return (10, 0)
    return CAPABILITY.get(card.architecture)


def mxfp4_backend(card: Gpu, engine: str = "vllm") -> str:
    """The engine's MXFP4 MoE backend on this card with its default settings (vLLM's
    get_mxfp4_backend; SGLang's server_args for gpt-oss)."""
    cc = capability(card)
    if engine == "sglang":
        return "sglang-flashinfer" if cc is not None and cc[0] == 10 else "sglang-triton"
    if cc == (9, 0):
        return "triton"
    if cc is not None and cc[0] == 10:
        return "flashinfer"
    return "marlin" if cc is not None else "triton"  # ROCm runs the Triton kernels


def served_format(name: str | None) -> str | None:
    """The format key when `name` is one of the formats priced here, else None."""
    if not is_format(name):
        return None
    key = quant_format(name).key
    return key if key in SERVED_FORMATS else None


def check_served(model, card: Gpu, engine: str, fmt: str, version: str | None = None) -> None:
    """Refuse, in one sentence, a format the engine (at `version`, None: its current one)
    cannot run on this card or this model."""
    spec = model.spec
    if engine != "vllm" and fmt not in SGLANG_FORMATS:
        raise CalculatorError("serve_format_engine", name=fmt, engine=engine)
    if engine == "sglang" and fmt in SGLANG_LEGACY_REFUSED and version == SGLANG_LEGACY:
        raise CalculatorError("serve_format_version", name=fmt, engine=engine, version=version)
    if engine == "sglang" and fmt == "mxfp4" and capability(card) is None:  # its ROCm path (aiter): not modelled
        raise CalculatorError("serve_format_maker", name=fmt, engine=engine, gpu=card.name)
    if fmt == "mxfp4" and not (spec is not None and spec.experts):
        raise CalculatorError("serve_mxfp4_dense", model=model.name[:60])
    need, have = MIN_CAPABILITY[fmt], capability(card)
    if fmt.startswith("torchao-"):
        if spec is not None and spec.experts:
            raise CalculatorError("serve_torchao_moe", name=fmt, model=model.name[:60])
        if have is None:  # torchao's CUDA kernels; other makers' cards are not modelled
            raise CalculatorError("serve_format_maker", name=fmt, engine=engine, gpu=card.name)
    if have is not None and have < need:
        raise CalculatorError("serve_format_card", name=fmt, gpu=card.name, need=f"{need[0]}.{need[1]}",
                              have=f"{have[0]}.{have[1]}")


def serving_precision(model, card: Gpu, engine: str, dtype: str | None,
                      version: str | None = None) -> tuple[str, str | None, str]:
    """(the dtype the engine's other figures follow, the format priced here or None, why this
    precision: "given", "as_shipped" or "default"). A format vLLM's layouts are not modelled
    for (bitsandbytes, GGUF) is refused with the list of those that are."""
    from calculator.serving.engines import WEIGHT_DTYPES, serving_weights

    source = "given"
    if dtype is None:
        dtype, source = default_weights(model, card, engine, version)
    fmt = served_format(dtype)
    if fmt is None:
        if is_format(dtype) and quant_format(dtype).key not in ("fp8-tensor", "gptq-4bit", "awq-4bit"):
            raise CalculatorError("serve_format", name=quant_format(dtype).key,
                                  choices=", ".join((*WEIGHT_DTYPES, *SERVED_FORMATS, "fp8-tensor", "gptq-4bit",
                                                     "awq-4bit")))
        plain = normalize_dtype(serving_weights(dtype))  # bf16 -> bfloat16
        if engine == "vllm" and source == "given":
            check_given_dtype(model.config, card, capability(card), plain)
        return plain, None, source
    check_served(model, card, engine, fmt, version)
    return ("float8" if fmt == "fp8-block128" else "bfloat16"), fmt, source


def default_weights(model, card: Gpu, engine: str, version: str | None = None) -> tuple[str, str]:
    """(precision, why) when none is asked for: the checkpoint's own format when the engine
    runs it on this card (vLLM loads gpt-oss in MXFP4 whatever --dtype says), else the engine's
    `--dtype auto` (vLLM: the checkpoint's dtype where the card runs it; SGLang: the checkpoint's
    dtype, a float32 one in float16; auto_dtype.py), why being "default", or "shipped_not_run"
    when the checkpoint ships a format the engine does not run here (shipped_refusal says why)."""
    plain = auto_dtype(model.config, capability(card))[0] if engine == "vllm" else sglang_auto_dtype(model.config)
    shipped = served_format(shipped_format(model.config))
    if shipped is None:
        return plain, "default"
    try:
        check_served(model, card, engine, shipped, version)
    except CalculatorError:
        return plain, "shipped_not_run"
    return shipped, "as_shipped"


def dtype_fallback(model, card: Gpu, engine: str) -> dict | None:
    """When the card or the model makes vLLM's `--dtype auto` fall back from the checkpoint's
    dtype: {"checkpoint", "served", "reason" (auto_dtype's), "model_type"}; None otherwise."""
    if engine != "vllm":
        return None
    served, why = auto_dtype(model.config, capability(card))
    if why is None:
        return None
    return {"checkpoint": checkpoint_dtype(model.config), "served": served, "reason": why,
            "model_type": str((model.config or {}).get("model_type", ""))[:40]}


def shipped_refusal(model, card: Gpu, engine: str, version: str | None = None) -> tuple[str, CalculatorError] | None:
    """(the format the checkpoint ships, the engine's refusal) when the engine does not run that
    format on this card (a torchao int4 checkpoint on a T4: kernels from compute capability
    8.0); None when it does, or when the checkpoint ships a plain dtype."""
    shipped = served_format(shipped_format(model.config))
    if shipped is None:
        return None
    try:
        check_served(model, card, engine, shipped, version)
    except CalculatorError as refusal:
        return shipped, refusal
    return None


def format_weights_per_gpu(summary: ModelSummary, spec: ArchSpec, fmt: str, tensor: int, card: Gpu,
                           bfloat16_bytes: int, experts_only: bool = False, engine: str = "vllm") -> int:
    """One rank's weights with `fmt`'s matrices in the engine's layout: `bfloat16_bytes` (the
    rank's weights all in bfloat16, engines.weights_per_gpu or its experts' share) with each
    quantized slice replaced by its stored bytes."""
    total = float(bfloat16_bytes)
    base = tensor_parallel(summary, spec, "bfloat16", tensor)
    linears = [m for m in summary.linears if m.kind != "tied-head"]
    for matrix, split in zip(linears, base.matrices):
        if experts_only and matrix.kind != "experts":
            continue
        if matrix.kind == "head" or is_router(matrix, spec) or (fmt == "mxfp4" and matrix.kind != "experts"):
            continue
        params = split.bytes_per_gpu / 2
        in_p, out_p = _slice(matrix, split.split, params)
        if fmt == "mxfp4":
            stored = _mxfp4_expert_bytes(matrix, spec, tensor, mxfp4_backend(card, engine))
        elif fmt == "nvfp4":
            stored = matrix.count * (nvfp4_bytes(in_p, out_p) + 4)  # + the input scale
        elif fmt.startswith("torchao-"):
            stored = matrix.count * torchao_served_bytes(fmt, in_p, out_p, card)
        else:
            stored = matrix.count * fp8_bytes(in_p, out_p, 128)
        total += stored - split.bytes_per_gpu
    if fmt == "mxfp4" and not experts_only:  # the engine's expert biases (priced above) replace the model's own
        total -= 2 * _expert_bias_params(summary, spec)
    return math.ceil(total)


def torchao_served_bytes(fmt: str, inputs: int, outputs: int, card: Gpu) -> int:
    """One rank's slice of a matrix as torchao stores it under vLLM on this card (see above)."""
    if fmt == "torchao-int8":
        return torchao_int8_bytes(inputs, outputs, scale_bytes=4)
    if inputs % TORCHAO_GROUP:
        return 2 * inputs * outputs  # torchao skips it: bfloat16
    have = capability(card)
    if have is None or have < (9, 0):
        inputs, outputs = _round_up(inputs, TINYGEMM_PADDING[0]), _round_up(outputs, TINYGEMM_PADDING[1])
    return torchao_int4_bytes(inputs, outputs, TORCHAO_GROUP)


def _expert_bias_params(summary: ModelSummary, spec: ArchSpec) -> int:
    """One bias per output row of each expert (2 I for gate and up, H for down), when the model
    has them (gpt-oss): the bfloat16 weights count them whole on every rank."""
    intermediate = spec.expert_intermediate or spec.intermediate
    rows = sum(m.count * (2 * intermediate if _is_gate_up(m, intermediate) else spec.hidden)
               for m in summary.linears if m.kind == "experts")
    return rows if summary.groups.get("bias", 0) >= rows else 0


def _is_gate_up(matrix, intermediate: int) -> bool:
    return 2 * intermediate in (matrix.in_features, matrix.out_features) or "gate_up" in matrix.name


def _slice(matrix, how: str, params: float) -> tuple[int, int]:
    """(inputs, outputs) of one rank's slice: a column split keeps the inputs, a row split
    the outputs (key/value heads replicated past their count are in `params`)."""
    if how == "columns":
        return matrix.in_features, math.ceil(params / (matrix.in_features * matrix.count))
    if how == "rows":
        return math.ceil(params / (matrix.out_features * matrix.count)), matrix.out_features
    return matrix.in_features, matrix.out_features


def _mxfp4_expert_bytes(matrix, spec: ArchSpec, tensor: int, backend: str) -> float:
    """The experts of one fused tensor on one rank, padded as the backend pads them: packed
    E2M1 pairs, one E8M0 byte per 32 inputs, and the bias the engine registers per output row
    (bfloat16; float32 on vLLM's Triton backend and both of SGLang's). w13 (gate and up) is
    [2 I', H'], w2 (down) [H', I'], with I' the expert intermediate size per rank: taken from the config, since a
    checkpoint may store the fused tensor either way round (gpt-oss: [E, H, 2 I])."""
    hidden = spec.hidden
    intermediate = spec.expert_intermediate or spec.intermediate
    pad_i, pad_h = MXFP4_PADDING[backend]
    bias = MXFP4_BIAS_BYTES[backend]
    per_rank = _round_up(math.ceil(intermediate / tensor), pad_i)
    if _is_gate_up(matrix, intermediate):
        rows, cols = 2 * per_rank, _round_up(hidden, pad_h)
    else:
        rows, cols = _round_up(hidden, pad_h), per_rank
    return matrix.count * (rows * cols / 2 + rows * math.ceil(cols / 32) + rows * bias)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
