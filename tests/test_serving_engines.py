"""The other engines of the serving chapter: SGLang's fraction of free memory, llama.cpp's KV
buffer (checked against two published llama-server logs), and transformers across GPUs."""

from __future__ import annotations

import math

import pytest

from calculator.models.architecture import ArchSpec, AttentionGroup
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.distributed.parallel import tensor_parallel
from calculator.serving.engines import GIB, allocator_rounding_bytes, weights_per_gpu
from calculator.serving.sglang import SGLANG_START_BYTES, sglang_fraction
from calculator.serving.plan import llamacpp_cache, serve, transformers_multi_gpu


def test_sglang_fraction_table():
    """SGLang 0.4.6's default --mem-fraction-static: by TP size up to 80 GiB, then a larger
    share on larger cards."""
    h100, l4, h200 = gpu("h100"), gpu("l4"), gpu("h200")
    assert [sglang_fraction(h100.memory_bytes, t) for t in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    assert sglang_fraction(l4.memory_bytes, 4) == 0.85
    gib = h200.memory_bytes / GIB
    assert sglang_fraction(h200.memory_bytes, 1) == round(min(0.88 + 48 * 0.12 / gib, (gib - 18) / gib), 4)


def test_sglang_pool_by_hand():
    """tokens = (free memory at start x fraction - weights) // bytes per token, with the weights
    as SGLang measures them (free memory lost, so the allocator's rounding included)."""
    model, card = catalog_model("llama-3.1-8b"), gpu("h100")
    deployment = serve(model, card, engine="sglang", context=131_072)
    free = card.total_bytes - SGLANG_START_BYTES
    weights = weights_per_gpu(model.summary, model.spec, model.config, "bfloat16", 1)
    weights += allocator_rounding_bytes(model.summary, model.spec, "bfloat16", 1)
    cell = 32 * 8 * 128 * 2 * 2
    tokens = (math.floor(free * 0.88) - weights) // cell
    r = deployment.replica
    assert (r.kv_tokens, r.kv_pool_bytes_per_gpu, r.sequences) == (tokens, tokens * cell, tokens // 131_072)
    assert deployment.utilization == 0.88 and deployment.to_json()["block_tokens"] == 1


def test_allocator_rounding_of_fused_matrices():
    """Llama-3.1-8B's fused matrices are whole multiples of 2 MiB at TP1 (nothing to round);
    at TP4, QwQ-32B-sized matrices are not (o_proj: 12.5 MiB in a 14 MiB segment)."""
    llama = catalog_model("llama-3.1-8b")
    assert allocator_rounding_bytes(llama.summary, llama.spec, "bfloat16", 1) == 0
    assert allocator_rounding_bytes(llama.summary, llama.spec, "int4", 1) == 0  # quantized: not rounded here


# -- llama.cpp ------------------------------------------------------------------------------------

def _spec(layers: int, kv_heads: int, head_dim: int, window: int | None = None, positions: int = 4096) -> ArchSpec:
    return ArchSpec(kind="decoder", hidden=kv_heads * head_dim, layers=layers, encoder_layers=0, heads=kv_heads,
                    head_dim=head_dim, kv_heads=kv_heads, intermediate=4, gated_mlp=True, vocab=32,
                    max_positions=positions, attention=(AttentionGroup(layers, kv_heads, head_dim, head_dim, window),))


def test_llamacpp_matches_two_published_kv_buffers():
    """`llama_kv_cache_unified: size = 1536.00 MiB (4096 cells, 32 layers, 1 seqs)` for
    Phi-3-mini (32 heads of 96, f16), and 144.00 MiB for a Qwen2.5-3B-class model (36 layers,
    2 key/value heads of 128)."""
    assert llamacpp_cache(_spec(32, 32, 96), 4096).gpu_bytes == 1536 * 2**20
    assert llamacpp_cache(_spec(36, 2, 128), 4096).gpu_bytes == 144 * 2**20


def test_llamacpp_context_slots_cache_types_and_layers():
    spec = catalog_model("llama-3.1-8b").spec
    per_token = 32 * 8 * 128 * 2 * 2
    one = llamacpp_cache(spec, 8000)
    assert one.n_ctx == 8192 and one.gpu_bytes == 8192 * per_token  # padded to 256
    # -np 4 shares the same cells: four slots, same buffer (unified); split, 2,048 each
    shared = llamacpp_cache(spec, 8192, parallel=4)
    split = llamacpp_cache(spec, 8192, parallel=4, unified=False)
    assert shared.gpu_bytes == split.gpu_bytes == one.gpu_bytes
    assert (shared.tokens_per_slot, split.tokens_per_slot) == (8192, 2048)
    # q8_0 keeps 34 bytes per 32 numbers
    assert llamacpp_cache(spec, 8192, cache_type_k="q8_0", cache_type_v="q8_0").gpu_bytes == \
        8192 * 32 * 8 * 128 * 2 * 34 // 32
    # -ngl 17 offloads the last 16 layers (the output layer counts as one)
    half = llamacpp_cache(spec, 8192, gpu_layers=17)
    assert (half.layers_on_gpu, half.gpu_bytes, half.host_bytes) == (16, one.gpu_bytes // 2, one.gpu_bytes // 2)
    # Gemma 2's sliding layers keep window + ubatch cells, its full layers the whole context
    gemma = catalog_model("gemma-2-9b").spec
    assert llamacpp_cache(gemma, 8192, parallel=1).gpu_bytes == 21 * (8192 + 4096 + 512) * 8 * 256 * 2 * 2
    with pytest.raises(CalculatorError):
        llamacpp_cache(spec, 8192, cache_type_k="q3_k")


# -- transformers across GPUs ---------------------------------------------------------------------

def test_transformers_device_map_against_tp_plan():
    model, card = catalog_model("llama-3.1-70b"), gpu("a100-80gb")
    result = transformers_multi_gpu(model, card, 4, "bfloat16", batch=1, context=4096)
    assert sum(result.device_map_weights) == model.summary.total_bytes_at("bfloat16")
    assert result.tp_weights_bytes == tensor_parallel(model.summary, model.spec, "bfloat16", 4).per_gpu_bytes
    assert sum(result.device_map_cache) == pytest.approx(4096 * 327_680, rel=1e-3)
    assert result.tp_cache_bytes == 4096 * 327_680 // 4
    assert result.tp_peak_bytes < result.device_map_peak_bytes
    # 7 does not divide 64 heads: no tensor-parallel plan, device_map still works
    odd = transformers_multi_gpu(model, card, 7, "bfloat16")
    assert odd.tp_weights_bytes is None and len(odd.device_map_weights) == 7


# -- the commands the chapter prints --------------------------------------------------------------

def test_commands_carry_the_layout_and_quote_the_model():
    from calculator.serving.launch import llamacpp_command, sglang_command, transformers_code, vllm_command

    assert vllm_command("meta-llama/Llama-3.1-70B-Instruct", tensor=4, replicas=2, context=4096, kv_dtype="float8") == (
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --dtype bfloat16 --tensor-parallel-size 4 "
        "--data-parallel-size 2 --max-model-len 4096 --kv-cache-dtype fp8")
    assert "--quantization fp8" in vllm_command("m/x", dtype="float8")
    assert vllm_command("a b; rm -rf /").startswith("vllm serve 'a b; rm -rf /'")
    assert sglang_command("m/x", tensor=2, fraction=0.8) == \
        "python -m sglang.launch_server --model-path m/x --dtype bfloat16 --tp 2 --mem-fraction-static 0.8"
    assert llamacpp_command("x.gguf", context=8192, slots=4, cache_type_k="q8_0", cache_type_v="q8_0") == (
        "llama-server -m x.gguf -c 8192 -np 4 -ngl 999 --cache-type-k q8_0 --cache-type-v q8_0 -fa on -kvu")
    code = transformers_code("org/m'); import os; ('", 4, "float16", "tp")
    compile(code, "snippet", "exec")  # the id stays a string literal
    assert "DistributedConfig(tp_size=4)" in code and "torch.float16" in code
