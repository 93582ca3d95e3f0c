"""Which software loads each quantization format: what the installed transformers (5.24) reads
natively, next to what only the serving engines and llama.cpp run.

Read from transformers' own source (quantizers/quantizer_*.py and utils/quantization_config.py):
- FineGrainedFP8Config (block-wise float8, 128 x 128 by default): float8 kernels on compute
  capability 8.9 or more (Ada, Hopper, Blackwell); below, or without a GPU, it dequantizes the
  checkpoint to bfloat16 on load (quantizer_finegrained_fp8.py).
- Mxfp4Config: only gpt-oss's experts (param_needs_quantization accepts Mxfp4GptOssExperts);
  kept in MXFP4 on compute capability 7.5 or more with triton >= 3.4 and the `kernels` package,
  else dequantized to bfloat16 on load (quantizer_mxfp4.py).
- NVFP4Config: quantizes a full-precision checkpoint on load, bias-free nn.Linear only, on
  Blackwell (sm100+) only; "Loading pre-quantized NVFP4 checkpoints is not supported yet"
  (quantizer_nvfp4.py): those run in vLLM, SGLang or TensorRT-LLM.
- TorchAoConfig: torchao's configs on nn.Linear only (quantizer_torchao.py).
- BitsAndBytesConfig, GPTQConfig / AwqConfig (through GPTQModel), GgufConfig, and float8
  checkpoints in the compressed-tensors layout through CompressedTensorsConfig.
Engines: llama.cpp's ggml has GGML_TYPE_MXFP4 and GGML_TYPE_NVFP4; vLLM reads ModelOpt NVFP4
checkpoints (quantization "modelopt_fp4"), gpt-oss's MXFP4, DeepSeek's block float8, GPTQ, AWQ,
bitsandbytes and torchao checkpoints.

Pure data: the page words each fact from its key (content/ui/*/quantization.toml).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormatSupport:
    transformers: str  # the transformers 5.24 config class that loads it ("" when none does)
    native: str  # when transformers keeps the format in memory: "always", a condition key, or "never"
    engines: tuple[str, ...]  # the serving engines and runtimes that run it as stored


_VLLM_SGLANG = ("vLLM", "SGLang")

SUPPORT: dict[str, FormatSupport] = {
    "bfloat16": FormatSupport("", "always", ("vLLM", "SGLang", "llama.cpp")),
    "fp8-tensor": FormatSupport("CompressedTensorsConfig", "cc89", (*_VLLM_SGLANG, "TensorRT-LLM")),
    "fp8-block128": FormatSupport("FineGrainedFP8Config", "cc89", _VLLM_SGLANG),
    "mxfp4": FormatSupport("Mxfp4Config", "gpt_oss_cc75", (*_VLLM_SGLANG, "llama.cpp")),
    "nvfp4": FormatSupport("NVFP4Config", "never_prequantized", (*_VLLM_SGLANG, "TensorRT-LLM", "llama.cpp")),
    "torchao-int8": FormatSupport("TorchAoConfig", "always", ("vLLM",)),
    "torchao-int4": FormatSupport("TorchAoConfig", "always", ("vLLM",)),
    "bnb-int8": FormatSupport("BitsAndBytesConfig", "always", ("vLLM",)),
    "bnb-nf4": FormatSupport("BitsAndBytesConfig", "always", ("vLLM",)),
    "bnb-nf4-dq": FormatSupport("BitsAndBytesConfig", "always", ("vLLM",)),
    "bnb-fp4": FormatSupport("BitsAndBytesConfig", "always", ()),
    "gptq-4bit": FormatSupport("GPTQConfig", "always", _VLLM_SGLANG),
    "awq-4bit": FormatSupport("AwqConfig", "always", _VLLM_SGLANG),
}
GGUF_SUPPORT = FormatSupport("GgufConfig", "gguf_kernel", ("llama.cpp",))


def support_of(format_key: str) -> FormatSupport:
    """Who loads a format (every GGUF block type shares llama.cpp's answer)."""
    return SUPPORT.get(format_key, GGUF_SUPPORT)
