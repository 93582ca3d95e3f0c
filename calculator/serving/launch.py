"""The command lines and code that start what the serving chapter computed: `vllm serve`,
SGLang's launch_server, `llama-server`, and transformers across GPUs. Built from values the
calculator chose or checked; the model id goes in through shlex.quote or repr(), so nothing a
user typed changes what the command does."""

from __future__ import annotations

import shlex

# What each weight dtype needs from the checkpoint or the engine: float8 can be made at load
# time (--quantization fp8); int8 and int4 need a checkpoint quantized that way (w8a8, GPTQ,
# AWQ), whose config the engine reads by itself.
RUNTIME_FLAGS = {"float8": ("--quantization", "fp8")}
DTYPE_FLAGS = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def vllm_command(model_id: str, *, tensor: int = 1, replicas: int = 1, dtype: str = "bfloat16", kv_dtype: str = "auto",
                 context: int | None = None, utilization: float | None = None, max_num_seqs: int | None = None,
                 max_num_batched_tokens: int | None = None, cpu_offload_gib: float = 0.0,
                 prefix_caching: bool | None = None) -> str:
    parts = ["vllm", "serve", shlex.quote(model_id)]
    if dtype in DTYPE_FLAGS:
        parts += ["--dtype", DTYPE_FLAGS[dtype]]
    parts += list(RUNTIME_FLAGS.get(dtype, ()))
    if tensor > 1:
        parts += ["--tensor-parallel-size", str(tensor)]
    if replicas > 1:
        parts += ["--data-parallel-size", str(replicas)]
    if context:
        parts += ["--max-model-len", str(context)]
    if utilization is not None:
        parts += ["--gpu-memory-utilization", f"{utilization:g}"]
    if max_num_seqs:
        parts += ["--max-num-seqs", str(max_num_seqs)]
    if max_num_batched_tokens:
        parts += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if kv_dtype == "float8":
        parts += ["--kv-cache-dtype", "fp8"]
    if cpu_offload_gib:
        parts += ["--cpu-offload-gb", f"{cpu_offload_gib:g}"]
    if prefix_caching is not None:
        parts.append("--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching")
    return " ".join(parts)


def sglang_command(model_id: str, *, tensor: int = 1, replicas: int = 1, dtype: str = "bfloat16",
                   kv_dtype: str = "auto", context: int | None = None, fraction: float | None = None,
                   max_running_requests: int | None = None, chunked_prefill: int | None = None) -> str:
    parts = ["python", "-m", "sglang.launch_server", "--model-path", shlex.quote(model_id)]
    if dtype in DTYPE_FLAGS:
        parts += ["--dtype", DTYPE_FLAGS[dtype]]
    parts += list(RUNTIME_FLAGS.get(dtype, ()))
    if tensor > 1:
        parts += ["--tp", str(tensor)]
    if replicas > 1:
        parts += ["--dp", str(replicas)]
    if context:
        parts += ["--context-length", str(context)]
    if fraction is not None:
        parts += ["--mem-fraction-static", f"{fraction:g}"]
    if max_running_requests:
        parts += ["--max-running-requests", str(max_running_requests)]
    if chunked_prefill:
        parts += ["--chunked-prefill-size", str(chunked_prefill)]
    if kv_dtype == "float8":
        parts += ["--kv-cache-dtype", "fp8_e5m2"]
    return " ".join(parts)


def llamacpp_command(gguf: str, *, context: int, slots: int = 1, gpu_layers: int = 999, cache_type_k: str = "f16",
                     cache_type_v: str = "f16", unified: bool = True) -> str:
    parts = ["llama-server", "-m", shlex.quote(gguf), "-c", str(context), "-np", str(slots), "-ngl", str(gpu_layers)]
    if cache_type_k != "f16":
        parts += ["--cache-type-k", cache_type_k]
    if cache_type_v != "f16":
        parts += ["--cache-type-v", cache_type_v, "-fa", "on"]  # a quantized V cache needs flash attention
    if slots > 1 and unified:
        parts.append("-kvu")
    return " ".join(parts)


def transformers_code(model_id: str, gpus: int, dtype: str = "bfloat16", plan: str = "device_map") -> str:
    """device_map: one process, whole layers on successive GPUs (accelerate). tp: one process
    per GPU started by torchrun, every matrix split (transformers' tensor-parallel plan)."""
    torch_dtype = f"torch.{DTYPE_FLAGS.get(dtype, 'bfloat16')}"
    if plan == "device_map":
        return "\n".join([
            "import torch",
            "from transformers import AutoModelForCausalLM",
            "",
            f"model = AutoModelForCausalLM.from_pretrained({model_id!r}, dtype={torch_dtype}, device_map=\"auto\")",
            "print(model.hf_device_map)  # which GPU holds which layer",
        ])
    return "\n".join([
        f"# torchrun --nproc-per-node {gpus} run.py",
        "import torch",
        "from transformers import AutoModelForCausalLM",
        "from transformers.distributed import DistributedConfig",
        "",
        f"model = AutoModelForCausalLM.from_pretrained({model_id!r}, dtype={torch_dtype},",
        f"                                             distributed_config=DistributedConfig(tp_size={gpus}))",
    ])
