"""What real quantization formats cost, matrix by matrix, on the model's real shapes.

A format stores each quantized weight matrix as its packed low-bit values plus the
metadata its block layout needs (scales, zero points, minimums); the modules a format leaves
alone (embeddings, the output head, norms, biases, mixture-of-experts routers) stay in 16
bits (32 for GGUF's one-dimensional tensors). Every byte below is counted from the model's
matrices (ModelSummary.linears) and parameter groups, never from an average.

Sources, one per family (each is also in the `source` of its format):
- GGUF: llama.cpp, ggml/src/ggml-common.h (the block_q* structs: Q4_0 is a float16 scale and
  16 bytes of nibbles per 32 weights, 18 bytes; the K-quants use 256-weight super-blocks),
  and src/llama-quant.cpp (blocks run along rows; a row whose length is not a multiple of 256
  falls back from Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, Q3_K/Q2_K to IQ4_NL, and to F16
  if even that does not divide; router weights and one-dimensional tensors are not quantized).
- bitsandbytes: Dettmers et al., "LLM.int8()" (2022), row-wise absmax scales; Dettmers et al.,
  "QLoRA" (2023): NF4 in blocks of 64 with a float32 absmax, and double quantization of those
  absmax values to 8 bits with a float32 scale per 256 of them (0.127 bits per weight). The
  16-value NF4 code and the 256-value dynamic code are kept per matrix (bitsandbytes 0.50).
  transformers 5's integration converts nn.Linear modules only: fused expert tensors,
  routers and the output head stay in 16 bits (checked on a real model in the tests).
- GPTQ: Frantar et al., "GPTQ" (2022); packing of AutoGPTQ/GPTQModel's QuantLinear: qweight
  int32 [in/8, out], qzeros int32 [groups, out/8], scales float16 [groups, out], g_idx int32 [in].
- AWQ: Lin et al., "AWQ" (2023); packing of AutoAWQ's WQLinear_GEMM: qweight int32
  [in, out/8], qzeros int32 [groups, out/8], scales float16 [groups, out].
- float8: Micikevicius et al., "FP8 formats for deep learning" (2022): one byte per weight in
  E4M3, plus one float32 scale per tensor, or per 128x128 block as in DeepSeek-V3's checkpoint
  (weight_scale_inv float32 [ceil(out/128), ceil(in/128)]; transformers' FineGrainedFP8Config).
- MXFP4: OCP Microscaling Formats (MX) v1.0: 4-bit E2M1 values in blocks of 32 along the input
  dimension, one shared E8M0 scale byte per block: 17 bytes per 32 weights. gpt-oss ships its
  experts so (transformers' integrations/mxfp4.py: `*_blocks` uint8 [..., in/32, 16] and
  `*_scales` uint8 [..., in/32], the scale biased by 127), and transformers' Mxfp4 quantizer
  converts only those experts: on a mixture of experts the format covers the experts alone,
  attention and router staying in bfloat16; on a dense model, every linear layer.
- NVFP4: NVIDIA's 4-bit format: E2M1 values in blocks of 16, one FP8 E4M3 scale per block
  and one float32 scale per tensor (ModelOpt checkpoints: weight, weight_scale,
  weight_scale_2; transformers' integrations/nvfp4.py: SF_VEC_SIZE = 16).
- torchao weight-only (transformers' TorchAoConfig, nn.Linear only): Int8WeightOnlyConfig is
  torchao's Int8Tensor, int8 [out, in] with one scale per output row in the model's dtype and
  an int8 zero point; Int4WeightOnlyConfig is Int4Tensor, two weights per byte with a scale and
  a zero point in the model's dtype per group of 128 inputs (pytorch/ao,
  quantize_/workflows/int8/int8_tensor.py and int4/int4_tensor.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.core.memo import kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError
from calculator.models.summary import Linear, ModelSummary

GROUP_SIZES = (32, 64, 128)
DEFAULT_GROUP_SIZE = 128

# GGUF block types: (weights per block, bytes per block), from the block_q* structs of
# llama.cpp's ggml-common.h (field by field in tests/test_quantization.py).
GGUF_BLOCKS: dict[str, tuple[int, int]] = {
    "Q8_0": (32, 34), "Q6_K": (256, 210), "Q5_K": (256, 176), "Q5_1": (32, 24), "Q5_0": (32, 22),
    "Q4_K": (256, 144), "Q4_1": (32, 20), "Q4_0": (32, 18), "IQ4_NL": (32, 18), "Q3_K": (256, 110),
    "Q2_K": (256, 84), "F16": (1, 2),
}
# llama-quant.cpp: what a K-quant becomes when a row is not a multiple of 256 weights.
GGUF_FALLBACK = {"Q6_K": "Q8_0", "Q5_K": "Q5_1", "Q4_K": "Q5_0", "Q3_K": "IQ4_NL", "Q2_K": "IQ4_NL"}


@dataclass(frozen=True)
class QuantFormat:
    key: str  # language-neutral name, shown as is and used in URLs and the CLI
    family: str  # bf16, float8, bitsandbytes, gptq, awq, gguf
    nominal_bits: int
    source: str

    @property
    def quantizes_experts(self) -> bool:
        # transformers 5's bitsandbytes and torchao integrations convert nn.Linear only
        return self.family not in ("bitsandbytes", "torchao")

    @property
    def experts_only_on_moe(self) -> bool:
        """MXFP4 on a mixture of experts covers the experts alone (gpt-oss's checkpoints)."""
        return self.key == "mxfp4"

    @property
    def quantizes_head(self) -> bool:
        return self.family == "gguf"  # GGUF quantizes every 2-D tensor, embeddings included


FORMATS: tuple[QuantFormat, ...] = (
    QuantFormat("bfloat16", "bf16", 16, "2 bytes per weight"),
    QuantFormat("fp8-tensor", "float8", 8, "Micikevicius et al. 2022 (E4M3); one float32 scale per tensor"),
    QuantFormat("fp8-block128", "float8", 8, "DeepSeek-V3 checkpoint: float32 scale per 128x128 block"),
    QuantFormat("mxfp4", "microscaling", 4, "OCP MX v1.0: E2M1 in blocks of 32 + one E8M0 scale byte (gpt-oss)"),
    QuantFormat("nvfp4", "microscaling", 4, "NVIDIA NVFP4: E2M1 in blocks of 16 + one FP8 E4M3 scale, float32 per tensor"),
    QuantFormat("torchao-int8", "torchao", 8, "torchao Int8WeightOnlyConfig: int8, 16-bit scale + int8 zero per row"),
    QuantFormat("torchao-int4", "torchao", 4, "torchao Int4WeightOnlyConfig: int4, 16-bit scale + zero per 128 inputs"),
    QuantFormat("bnb-int8", "bitsandbytes", 8, "Dettmers et al. 2022, LLM.int8(): int8 rows + float32 row scale"),
    QuantFormat("bnb-nf4", "bitsandbytes", 4, "Dettmers et al. 2023, QLoRA: NF4, float32 absmax per 64 weights"),
    QuantFormat("bnb-nf4-dq", "bitsandbytes", 4, "QLoRA double quantization: 8-bit absmax, float32 per 256 blocks"),
    QuantFormat("bnb-fp4", "bitsandbytes", 4, "bitsandbytes FP4 (BitsAndBytesConfig's default quant type): NF4's layout"),
    QuantFormat("gptq-4bit", "gptq", 4, "Frantar et al. 2022; AutoGPTQ QuantLinear packing"),
    QuantFormat("awq-4bit", "awq", 4, "Lin et al. 2023; AutoAWQ WQLinear_GEMM packing"),
    QuantFormat("Q8_0", "gguf", 8, "llama.cpp ggml-common.h block_q8_0: 34 bytes per 32"),
    QuantFormat("Q6_K", "gguf", 6, "llama.cpp ggml-common.h block_q6_K: 210 bytes per 256"),
    QuantFormat("Q5_K", "gguf", 5, "llama.cpp ggml-common.h block_q5_K: 176 bytes per 256"),
    QuantFormat("Q4_K", "gguf", 4, "llama.cpp ggml-common.h block_q4_K: 144 bytes per 256"),
    QuantFormat("Q4_0", "gguf", 4, "llama.cpp ggml-common.h block_q4_0: 18 bytes per 32"),
    QuantFormat("Q3_K", "gguf", 3, "llama.cpp ggml-common.h block_q3_K: 110 bytes per 256"),
    QuantFormat("Q2_K", "gguf", 2, "llama.cpp ggml-common.h block_q2_K: 84 bytes per 256"),
)
FORMAT_KEYS = tuple(f.key for f in FORMATS)
_FORMAT_NAMES = frozenset(f.key.lower() for f in FORMATS if f.family != "bf16")  # built once: asked ~10,000 times a page


def is_format(name: object) -> bool:
    """Whether a name is one of the quantization formats (not a plain storage dtype)."""
    return isinstance(name, str) and name.strip().lower() in _FORMAT_NAMES


def storage_dtype(name: str) -> str:
    """The plain dtype whose size a format's weights have (for calculators that price dtypes
    only): 8-bit formats as int8 or float8, 4-bit ones as int4; a dtype stays itself."""
    if not is_format(name):
        return name
    fmt = quant_format(name)
    if fmt.nominal_bits >= 8:
        return "float8" if fmt.family == "float8" else "int8"
    return "int4"


def quant_format(key: str) -> QuantFormat:
    for fmt in FORMATS:
        if fmt.key.lower() == str(key).strip().lower():
            return fmt
    raise CalculatorError("unknown_format", name=str(key)[:40], choices=", ".join(FORMAT_KEYS))


def check_group_size(group_size: object) -> int:
    if isinstance(group_size, bool) or group_size not in GROUP_SIZES:
        raise CalculatorError("bad_group_size", value=str(group_size)[:20],
                              choices=", ".join(str(g) for g in GROUP_SIZES))
    return int(group_size)


# One matrix ------------------------------------------------------------------------------

def gguf_row_type(block_type: str, row: int) -> str:
    """The type llama.cpp really stores for rows of `row` weights (its fallback rule)."""
    size = GGUF_BLOCKS[block_type][0]
    if row % size == 0:
        return block_type
    fallback = GGUF_FALLBACK.get(block_type, "F16")
    return fallback if row % GGUF_BLOCKS[fallback][0] == 0 else "F16"


def gguf_bytes(block_type: str, rows: int, row: int) -> int:
    """`rows` rows of `row` weights: blocks run along each row (the tensor's ne[0])."""
    stored = gguf_row_type(block_type, row)
    weights, size = GGUF_BLOCKS[stored]
    return rows * (row // weights) * size


def bnb_int8_bytes(in_f: int, out_f: int) -> int:
    """LLM.int8(): int8 weights (CB) and one float32 absmax per output row (SCB)."""
    return in_f * out_f + 4 * out_f


def bnb_nf4_bytes(weights: int, double_quant: bool, blocksize: int = 64) -> int:
    """NF4: two weights per byte; one absmax per block of 64, float32, or with double
    quantization one byte each plus a float32 scale per 256 blocks and a float32 offset.
    Each matrix also keeps its 16-entry NF4 code (and the 256-entry 8-bit code) in float32."""
    blocks = math.ceil(weights / blocksize)
    packed = math.ceil(weights / 2)
    code = 16 * 4
    if not double_quant:
        return packed + 4 * blocks + code
    return packed + blocks + 4 * math.ceil(blocks / 256) + 4 + code + 256 * 4


def gptq_bytes(in_f: int, out_f: int, group_size: int) -> int:
    groups = math.ceil(in_f / group_size)
    qweight = math.ceil(in_f / 8) * out_f * 4
    qzeros = groups * math.ceil(out_f / 8) * 4
    scales = groups * out_f * 2
    g_idx = in_f * 4
    return qweight + qzeros + scales + g_idx


def awq_bytes(in_f: int, out_f: int, group_size: int) -> int:
    groups = math.ceil(in_f / group_size)
    return in_f * math.ceil(out_f / 8) * 4 + groups * math.ceil(out_f / 8) * 4 + groups * out_f * 2


def fp8_bytes(in_f: int, out_f: int, block: int | None) -> int:
    if block is None:
        return in_f * out_f + 4
    return in_f * out_f + 4 * math.ceil(in_f / block) * math.ceil(out_f / block)


def mxfp4_bytes(in_f: int, out_f: int) -> int:
    """Each row's inputs in blocks of 32: 16 bytes of E2M1 pairs and one E8M0 scale byte."""
    blocks = math.ceil(in_f / 32)
    return out_f * (16 * blocks + blocks)


def nvfp4_bytes(in_f: int, out_f: int) -> int:
    """Each row's inputs in blocks of 16: 8 bytes of E2M1 pairs and one FP8 E4M3 scale; and
    one float32 scale for the whole tensor."""
    blocks = math.ceil(in_f / 16)
    return out_f * (8 * blocks + blocks) + 4


def torchao_int8_bytes(in_f: int, out_f: int, scale_bytes: int = 2) -> int:
    """Int8Tensor: one byte per weight, per output row a scale (the model's dtype) and an int8 zero."""
    return in_f * out_f + out_f * (scale_bytes + 1)


def torchao_int4_bytes(in_f: int, out_f: int, group_size: int = DEFAULT_GROUP_SIZE, scale_bytes: int = 2) -> int:
    """Int4Tensor: two weights per byte, per group of inputs and output row a scale and a zero
    point in the model's dtype."""
    return out_f * math.ceil(in_f / 2) + 2 * scale_bytes * math.ceil(in_f / group_size) * out_f


def matrix_bytes(fmt: QuantFormat, in_f: int, out_f: int, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """Bytes of one in x out weight matrix stored in `fmt` (biases are counted apart)."""
    if fmt.family == "bf16":
        return 2 * in_f * out_f
    if fmt.key == "fp8-tensor":
        return fp8_bytes(in_f, out_f, None)
    if fmt.key == "fp8-block128":
        return fp8_bytes(in_f, out_f, 128)
    if fmt.key == "mxfp4":
        return mxfp4_bytes(in_f, out_f)
    if fmt.key == "nvfp4":
        return nvfp4_bytes(in_f, out_f)
    if fmt.key == "torchao-int8":
        return torchao_int8_bytes(in_f, out_f)
    if fmt.key == "torchao-int4":
        return torchao_int4_bytes(in_f, out_f, group_size)
    if fmt.key == "bnb-int8":
        return bnb_int8_bytes(in_f, out_f)
    if fmt.family == "bitsandbytes":
        return bnb_nf4_bytes(in_f * out_f, double_quant=fmt.key.endswith("-dq"))
    if fmt.family == "gptq":
        return gptq_bytes(in_f, out_f, group_size)
    if fmt.family == "awq":
        return awq_bytes(in_f, out_f, group_size)
    return gguf_bytes(fmt.key, out_f, in_f)


# Running a quantized matrix ---------------------------------------------------------------

def matmul_transient_bytes(summary: ModelSummary, spec: ArchSpec, fmt: QuantFormat | str, rows: int,
                           bnb_compute_dtype: str = "float32", act_dtype: str = "bfloat16") -> int:
    """Bytes a quantized matrix product holds beyond its 16-bit output, for `rows` tokens at
    once, on the widest matrix the format quantizes (bitsandbytes 0.50's kernels):
    - LLM.int8 (MatMul8bitLt, int8_vectorwise_quant, int8_scaled_mm): the input cast to
      float16 (when the model runs in bfloat16), its int8 copy and float32 row scales, and
      the int32 product dequantized into the output: rows x (2 in + in + 4 + 4 out).
    - 4-bit (matmul_4bit): the input cast to the compute dtype and the output in it; and,
      from 8 rows on with a float32 compute dtype (no tensor-core kernel) or above 512 rows
      otherwise, the weight dequantized into the compute dtype before F.linear
      (_gemm_4bit_use_custom_cuda; a single token uses the gemv kernel).
    GPTQ, AWQ and float8 kernels read the packed weight as they go: nothing beyond the output.
    """
    fmt = quant_format(fmt) if isinstance(fmt, str) else fmt
    if fmt.family != "bitsandbytes" or rows <= 0:
        return 0
    matrices = [m for m in summary.linears if _quantized_by(fmt, m, spec)]
    if not matrices:
        return 0
    act = 2 if act_dtype in ("float16", "bfloat16") else 4
    if fmt.key == "bnb-int8":
        cast = 2 if act_dtype == "bfloat16" else 0
        return max(rows * ((cast + 1) * m.in_features + 4 + 4 * m.out_features) for m in matrices)
    compute = {"float32": 4, "float16": 2, "bfloat16": 2}[bnb_compute_dtype]
    cast = 0 if compute == act else compute
    dequantize = rows >= 8 if compute == 4 else rows > 512
    return max(rows * cast * (m.in_features + m.out_features)
               + (m.in_features * m.out_features * compute if dequantize else 0) for m in matrices)


# A whole model ---------------------------------------------------------------------------

def is_router(matrix: Linear, spec: ArchSpec) -> bool:
    """A mixture-of-experts router: one output per expert. No format quantizes it."""
    return bool(spec.experts) and matrix.kind == "linear" and matrix.out_features == spec.experts


@dataclass(frozen=True)
class QuantizedModel:
    format: str
    family: str
    nominal_bits: int
    quantized_parameters: int
    quantized_bytes: int  # packed weights and their metadata
    kept_parameters: int  # embeddings, head, norms, biases, routers... left unquantized
    kept_bytes: int
    buffers_bytes: int
    total_bytes: int
    fallback_parameters: int  # GGUF rows that do not divide into blocks: stored in a fallback type
    source: str

    @property
    def bits_per_quantized_weight(self) -> float:
        return 8 * self.quantized_bytes / self.quantized_parameters if self.quantized_parameters else 0.0

    @property
    def bits_per_parameter(self) -> float:
        """Every byte of the model over every parameter: what the format really costs."""
        return 8 * self.total_bytes / (self.quantized_parameters + self.kept_parameters)

    def to_json(self) -> dict:
        return {**asdict(self), "bits_per_quantized_weight": self.bits_per_quantized_weight,
                "bits_per_parameter": self.bits_per_parameter}


def _quantized_by(fmt: QuantFormat, matrix: Linear, spec: ArchSpec) -> bool:
    if fmt.family == "bf16" or matrix.kind == "tied-head" or is_router(matrix, spec):
        return False
    if matrix.kind == "experts":
        return fmt.quantizes_experts
    if matrix.kind == "head":
        return fmt.quantizes_head
    return not (fmt.experts_only_on_moe and spec.experts)


def gguf_head_type(block_type: str, summary: ModelSummary, spec: ArchSpec) -> str:
    """llama.cpp's default recipe stores the output matrix (or the token embeddings that
    stand in for it when tied) in Q6_K below Q8_0; in Q8_0 when its rows do not divide into
    256-weight blocks or for Falcon (llama_tensor_get_type)."""
    if block_type == "Q8_0":
        return block_type
    if summary.model_type == "falcon" or spec.hidden % 256:
        return "Q8_0"
    return "Q6_K"


@kept_by_inputs(maxsize=512)  # a model's ~40 formats, for a dozen models; the result is frozen numbers
def quantize_model(summary: ModelSummary, spec: ArchSpec, fmt: QuantFormat | str,
                   group_size: int = DEFAULT_GROUP_SIZE) -> QuantizedModel:
    """The model's weights stored in `fmt`: each quantized matrix from its real shape, every
    other parameter in 16 bits (GGUF: one-dimensional tensors and routers in 32 bits)."""
    fmt = quant_format(fmt) if isinstance(fmt, str) else fmt
    group_size = check_group_size(group_size)
    quantized_params = quantized_bytes = fallback = 0
    router_params = 0
    for matrix in summary.linears:
        if is_router(matrix, spec):
            router_params += matrix.parameters
        if not _quantized_by(fmt, matrix, spec):
            continue
        quantized_params += matrix.parameters
        if fmt.family == "gguf" and matrix.kind == "head":
            head_type = gguf_head_type(fmt.key, summary, spec)
            quantized_bytes += matrix.count * gguf_bytes(head_type, matrix.out_features, matrix.in_features)
            continue
        quantized_bytes += matrix.count * matrix_bytes(fmt, matrix.in_features, matrix.out_features, group_size)
        if fmt.family == "gguf" and gguf_row_type(fmt.key, matrix.in_features) != fmt.key:
            fallback += matrix.parameters
    kept_params = summary.parameters - quantized_params
    kept_bytes = 2 * kept_params
    if fmt.family == "gguf":
        embedding = summary.groups.get("embedding", 0)
        row = spec.hidden if spec.hidden and embedding % spec.hidden == 0 else 0
        if embedding and row:
            tied = any(m.kind == "tied-head" for m in summary.linears)
            as_head = min(spec.vocab * row, embedding) if tied else 0
            quantized_params += embedding
            quantized_bytes += gguf_bytes(gguf_head_type(fmt.key, summary, spec), as_head // row, row)
            quantized_bytes += gguf_bytes(fmt.key, (embedding - as_head) // row, row)
            if gguf_row_type(fmt.key, row) != fmt.key:
                fallback += embedding - as_head
            kept_params -= embedding
        one_dim = summary.groups.get("norm", 0) + summary.groups.get("bias", 0) + router_params
        kept_bytes = 2 * kept_params + 2 * one_dim  # F32: 2 more bytes than F16 for each
    buffers = summary.buffer_bytes_at("bfloat16")
    return QuantizedModel(fmt.key, fmt.family, fmt.nominal_bits, quantized_params, quantized_bytes, kept_params,
                          kept_bytes, buffers, quantized_bytes + kept_bytes + buffers, fallback, fmt.source)


def quantize_all(summary: ModelSummary, spec: ArchSpec, group_size: int = DEFAULT_GROUP_SIZE,
                 formats=FORMATS) -> tuple[QuantizedModel, ...]:
    return tuple(quantize_model(summary, spec, fmt, group_size) for fmt in formats)


# The ideal ladder ------------------------------------------------------------------------

LADDER = ("float32", "bfloat16", "int8", "int4")


def ladder(summary: ModelSummary) -> list[tuple[str, int, float]]:
    """(dtype, bytes, factor from float32) with every parameter at the ideal size: float32 to
    4 bits divides the weights by 8."""
    full = summary.total_bytes_at("float32")
    return [(dtype, summary.total_bytes_at(dtype), full / summary.total_bytes_at(dtype)) for dtype in LADDER]


# What a checkpoint ships in -------------------------------------------------------------

def shipped_format(config: dict | None) -> str | None:
    """The format key a checkpoint's weights are stored in, from its quantization_config (the
    keys transformers 5 reads: quant_method, weight_block_size, bits, load_in_4bit...), or
    None for a checkpoint in a plain dtype or a layout not priced here."""
    quant = (config or {}).get("quantization_config")
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method") or "").lower()
    if method == "mxfp4":
        return "mxfp4"
    if method == "fp8":
        return "fp8-block128" if quant.get("weight_block_size") in ([128, 128], (128, 128)) else "fp8-tensor"
    if method in ("gptq", "awq") and quant.get("bits") == 4:
        return f"{method}-4bit"
    if method == "modelopt" and str(quant.get("quant_algo") or "").upper() == "NVFP4":
        return "nvfp4"
    if method == "torchao":
        return _torchao_format(quant.get("quant_type"))
    if method == "bitsandbytes":
        if quant.get("load_in_8bit"):
            return "bnb-int8"
        if quant.get("load_in_4bit"):
            if str(quant.get("bnb_4bit_quant_type") or "fp4") == "fp4":
                return "bnb-fp4"
            return "bnb-nf4-dq" if quant.get("bnb_4bit_use_double_quant") else "bnb-nf4"
    return None


def _torchao_format(quant_type) -> str | None:
    """torchao's saved config (TorchAoConfig.to_dict: {"default": config_to_dict(config)}, each
    config {"_type": class name, "_version", "_data": fields}): the weight-only configs priced
    here, int4 in groups of 128 (the group the torchao-int4 key prices); any other is None."""
    default = quant_type.get("default") if isinstance(quant_type, dict) else None
    if not isinstance(default, dict):
        return None
    data = default.get("_data") if isinstance(default.get("_data"), dict) else {}
    kind = default.get("_type")
    if kind == "Int8WeightOnlyConfig":
        return "torchao-int8"
    if kind == "Int4WeightOnlyConfig" and data.get("group_size", DEFAULT_GROUP_SIZE) == DEFAULT_GROUP_SIZE:
        return "torchao-int4"
    return None
