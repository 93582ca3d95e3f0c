"""What transformers holds on the GPUs when a quantized checkpoint is spread over several of
them with device_map="auto" (serving#multi-gpu-inference, `multi-gpu --dtype FORMAT`).

Read from the installed transformers 5.24 (quantizers/quantizer_mxfp4.py, validate_environment):
a pre-quantized MXFP4 checkpoint stays in MXFP4 on a CUDA card of compute capability 7.5 or
more (with Triton >= 3.4 and the `kernels` package, which the loading code installs); below
7.5 it is dequantized to bfloat16 ("We will default to dequantizing the model to bf16"). The
other formats load as their quantizers lay them out (format_layers.units_in_format). GGUF
files are dequantized on load by `from_pretrained(gguf_file=...)`: the precision to price is
the one they load into, so GGUF is refused here. Only device_map is priced for a format: the
tensor-parallel plan is priced for float32, float16 and bfloat16 (gpt-oss's own tp_plan in
5.24 splits its embeddings only, its experts going through the expert-parallel plan)."""

from __future__ import annotations

from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu
from calculator.core.precision import normalize_dtype
from calculator.memory.quantization import is_format, quant_format

FLOATS = ("float32", "float16", "bfloat16")
MXFP4_KERNEL_CAPABILITY = (7, 5)  # quantizer_mxfp4.py: compute_capability >= (7, 5)


def multi_gpu_dtype(dtype: str) -> str:
    """The precision asked, read: a float dtype or a format key; GGUF and the integer dtypes
    are refused in one sentence."""
    if is_format(dtype):
        fmt = quant_format(dtype)
        if fmt.family != "gguf":
            return fmt.key
    else:
        try:
            plain = normalize_dtype(dtype)
        except CalculatorError:
            plain = None
        if plain in FLOATS:
            return plain
    raise CalculatorError("multi_gpu_dtype", dtype=str(dtype)[:40], choices=", ".join(FLOATS))


def loaded_precision(card: Gpu, dtype: str) -> tuple[str, str]:
    """(what the GPUs hold, why): ("bfloat16", "dequantized") for MXFP4 on an NVIDIA card below
    7.5 or on Apple silicon (an "mps" device, which the quantizer dequantizes), else (dtype,
    "as_asked"). AMD's Instinct cards report 9.x through ROCm's CUDA API; a card typed by the
    reader is taken to run the kernels."""
    from calculator.serving.weights import capability

    dtype = multi_gpu_dtype(dtype)
    if dtype == "mxfp4":
        cc = capability(card)
        if card.group == "apple" or (cc is not None and cc < MXFP4_KERNEL_CAPABILITY):
            return "bfloat16", "dequantized"
    return dtype, "as_asked"


def unit_bytes(model, dtype: str) -> list[int] | None:
    """Each unit's bytes in the format (None for a float dtype: the units' own bytes_at)."""
    from calculator.memory.format_layers import units_in_format

    if not is_format(dtype):
        return None
    return [u.bytes for u in units_in_format(model.summary, model.spec, dtype)]
