"""The precision vLLM serves a checkpoint in with `--dtype auto` (its default), and the
precisions it refuses, on each card.

Read from vLLM's source (vllm/config/model.py, vllm/platforms/cuda.py):
- `_find_dtype`: the checkpoint's dtype is its config's `dtype` (`torch_dtype` before
  transformers 5), else its text config's, vision config's or encoder config's; none at all is
  read as float32.
- `supported_dtypes` of a CUDA card: bfloat16, float16, float32 from compute capability 8.0;
  float16, float32 from 6.0 ("Pascal, Volta and Turing NVIDIA GPUs, BF16 is not supported").
  ROCm's Instinct cards run all three.
- `_FLOAT16_NOT_SUPPORTED_MODELS` (gemma2, gemma3, gemma3_text, plamo2, glm4: "Numerical
  instability"): float16 is taken out of the supported list for them, and an explicit
  `--dtype float16` raises.
- `_resolve_auto_dtype`: the first supported dtype is preferred; a float32 checkpoint is served
  in it; a checkpoint in a supported dtype is served as it is; otherwise vLLM warns "Your device
  ... doesn't support ... Falling back to ... for compatibility" and serves the preferred one:
  a bfloat16 checkpoint in float16 on a T4, V100 or P100, and a Gemma 3 there in float32.
- `check_if_supports_dtype` raises for an explicit bfloat16 below compute capability 8.0.

SGLang's `--dtype auto` is simpler (python/sglang/srt/configs/model_config.py,
`_get_and_verify_dtype`, read at sgl-project/sglang 001adf56): the checkpoint's float16 or
bfloat16 as it is, whatever the card (no capability check); a float32 checkpoint, or one whose
config names no dtype, in float16, but in bfloat16 for a model type starting with "gemma".
SGLang reads the text config of a composite checkpoint; this reads the checkpoint's dtype as
vLLM does (the top level first), the same two bytes a weight either way.
"""

from __future__ import annotations

from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu

FLOAT16_REFUSED = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})
DTYPE_NAMES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
               "float": "float32"}
BFLOAT16_CAPABILITY = (8, 0)


def checkpoint_dtype(config: dict | None) -> str:
    """The checkpoint's dtype as vLLM reads it from its config (float32 when none says)."""
    config = config if isinstance(config, dict) else {}
    for part in (config, config.get("text_config"), config.get("vision_config"), config.get("encoder_config")):
        if isinstance(part, dict):
            for key in ("dtype", "torch_dtype"):
                value = part.get(key)
                if isinstance(value, str) and value.lower() in DTYPE_NAMES:
                    return DTYPE_NAMES[value.lower()]
    return "float32"


def supported_dtypes(model_type: str | None, capability) -> tuple[str, ...]:
    """What vLLM runs on this card for this model, the one it prefers first. `capability` is
    the card's compute capability (None: not NVIDIA's)."""
    if capability is None or capability >= BFLOAT16_CAPABILITY:
        dtypes = ("bfloat16", "float16", "float32")
    else:
        dtypes = ("float16", "float32")
    return tuple(d for d in dtypes if not (d == "float16" and model_type in FLOAT16_REFUSED))


def auto_dtype(config: dict | None, capability) -> tuple[str, str | None]:
    """(the dtype `--dtype auto` serves in, why it is not the checkpoint's own: None;
    "no_bfloat16" (a bfloat16 checkpoint, a card below 8.0: float16); "no_bfloat16_nor_float16"
    (the same for a model that refuses float16: float32); "float16_refused" (a float16
    checkpoint of such a model: bfloat16, or float32 below 8.0))."""
    model_type = (config or {}).get("model_type")
    supported = supported_dtypes(model_type, capability)
    preferred = supported[0]
    own = checkpoint_dtype(config)
    if own == "float32" or own in supported:
        return (preferred if own == "float32" else own), None
    if own == "float16":
        return preferred, "float16_refused"
    return preferred, "no_bfloat16_nor_float16" if model_type in FLOAT16_REFUSED else "no_bfloat16"


def sglang_auto_dtype(config: dict | None) -> str:
    """The dtype SGLang's `--dtype auto` serves in (module docstring): two bytes a weight in
    every case, float16 where the checkpoint is float16 or float32 (but Gemma's)."""
    own = checkpoint_dtype(config)
    if own != "float32":
        return own
    return "bfloat16" if str((config or {}).get("model_type") or "").startswith("gemma") else "float16"


def check_given_dtype(config: dict | None, card: Gpu, capability, dtype: str) -> None:
    """Refuse, as vLLM does at start, bfloat16 on a card below 8.0 and float16 on a model that
    refuses it."""
    if dtype == "bfloat16" and capability is not None and capability < BFLOAT16_CAPABILITY:
        raise CalculatorError("serve_bfloat16_card", gpu=card.name, have=f"{capability[0]}.{capability[1]}")
    model_type = (config or {}).get("model_type")
    if dtype == "float16" and model_type in FLOAT16_REFUSED:
        raise CalculatorError("serve_float16_model", model_type=str(model_type))
