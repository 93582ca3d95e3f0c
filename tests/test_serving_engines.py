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
from calculator.serving.engines import allocator_rounding_bytes, weights_per_gpu
from calculator.core.units import GIB
from calculator.serving.sglang import (SGLANG_CURRENT, SGLANG_LEGACY, SGLANG_START_BYTES, pool_cell_bytes,
                                      prefill_graph_sizes, sglang_fraction, sglang_reserved_mib, vision_factor)
from calculator.serving.versions import ENGINE_VERSIONS
from calculator.serving.plan import llamacpp_cache, serve, transformers_multi_gpu


def test_sglang_legacy_fraction_table():
    """SGLang 0.4.6's default --mem-fraction-static: by TP size up to 80 GiB, then a larger
    share on larger cards."""
    h100, l4, h200 = gpu("h100"), gpu("l4"), gpu("h200")
    old = SGLANG_LEGACY
    assert [sglang_fraction(h100.memory_bytes, t, old) for t in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    assert sglang_fraction(l4.memory_bytes, 4, old) == 0.85
    gib = h200.memory_bytes / GIB
    assert sglang_fraction(h200.memory_bytes, 1, old) == round(min(0.88 + 48 * 0.12 / gib, (gib - 18) / gib), 4)


def test_sglang_current_fraction_by_hand():
    """The current default (sgl-project/sglang 031ed82, arg_groups/memory_hook.py): on the card's
    nvidia-smi total M MiB, fraction = round((M - reserved) / M, 3) with reserved = 512 +
    1.5 x chunked prefill + 1024 x TP / 8 + 2 x decode graph batch + 8 x prefill graphs (MLA:
    1,536), at least 10,240 above 60 GiB. Worked by hand:
    - H100 (81,559 MiB), TP1: chunked 8,192, batch 256, 58 prefill graphs (8 + 14 + 8 + 8 + 12 +
      8 sizes up to 8,192): 512 + 12,288 + 128 + 512 + 464 = 13,904 -> 67,655 / 81,559 = 0.830;
    - same, TP2: 14,032 -> 0.828, the value sgl-project/sglang#29092 reports for Qwen3-32B on
      H100s (June 2026, before the September rung change, which does not touch 80 GB cards);
    - H100, MLA (DeepSeek-V2-Lite): 512 + 12,288 + 128 + 512 + 1,536 = 14,976 -> 0.816;
    - L4 (23,034 MiB), TP1: chunked 4,096, batch 48, 50 graphs: 512 + 6,144 + 128 + 96 + 400 =
      7,280 -> 0.684; TP4: batch 160: 512 + 6,144 + 512 + 320 + 400 = 7,888 -> 0.658;
    - B200 (183,359 MiB): chunked 16,384, batch 512, 74 graphs: 512 + 24,576 + 128 + 1,024 + 592
      = 26,832 -> 0.854."""
    h100, l4, b200 = gpu("h100").memory_bytes, gpu("l4").memory_bytes, gpu("b200").memory_bytes
    assert len(prefill_graph_sizes(8192)) == 58 and len(prefill_graph_sizes(4096)) == 50
    assert sglang_reserved_mib(h100, 1) == 13_904 and sglang_fraction(h100, 1) == 0.83
    assert sglang_fraction(h100, 2) == 0.828
    assert sglang_fraction(h100, 1, mla=True) == 0.816
    assert sglang_reserved_mib(l4, 1) == 7_280 and sglang_fraction(l4, 1) == 0.684
    assert sglang_fraction(l4, 4) == 0.658
    assert sglang_reserved_mib(b200, 1) == 26_832 and sglang_fraction(b200, 1) == 0.854
    # --chunked-prefill-size 2048 on the L4 (`serve --max-num-batched-tokens 2048`): 42 prefill graphs,
    # 512 + 3,072 + 128 + 96 + 336 = 4,144 -> 18,890 / 23,034 = 0.820
    assert sglang_reserved_mib(l4, 1, chunked=2048) == 4_144
    plan = serve(catalog_model("llama-3.2-1b"), gpu("l4"), engine="sglang", context=8192, layouts=False,
                 max_num_batched_tokens=2048)
    assert plan.utilization == 0.82


def test_sglang_current_pool_by_hand():
    """tokens = (free memory at start x fraction - weights) // bytes per token, with the weights
    as SGLang measures them (free memory lost, so the allocator's rounding included); 0.83 on an
    H100 now, 0.88 with --engine-version 0.4.6."""
    model, card = catalog_model("llama-3.1-8b"), gpu("h100")
    free = card.total_bytes - SGLANG_START_BYTES
    weights = weights_per_gpu(model.summary, model.spec, model.config, "bfloat16", 1)
    weights += allocator_rounding_bytes(model.summary, model.spec, "bfloat16", 1)
    cell = 32 * 8 * 128 * 2 * 2
    for version, fraction in ((None, 0.83), (SGLANG_LEGACY, 0.88)):
        deployment = serve(model, card, engine="sglang", context=131_072, engine_version=version)
        tokens = (math.floor(free * fraction) - weights) // cell
        r = deployment.replica
        assert (r.kv_tokens, r.kv_pool_bytes_per_gpu, r.sequences) == (tokens, tokens * cell, tokens // 131_072)
        assert deployment.utilization == fraction and deployment.to_json()["block_tokens"] == 1
        assert deployment.engine_version == (version or SGLANG_CURRENT)


def test_sglang_current_sliding_window_pool():
    """Gemma-2-9B (21 full and 21 sliding-window layers, 8 key/value heads of 256, bfloat16:
    8,192 bytes per layer per token): the current pool counts the sliding layers at 0.8 of a
    token per full-layer token (pool_configurator.HybridSWAPoolConfigurator), 0.4.6 at 1."""
    full = 21 * 8 * 256 * 2 * 2
    assert pool_cell_bytes(full, full) == full + 0.8 * full
    assert pool_cell_bytes(full, full, SGLANG_LEGACY) == pool_cell_bytes(2 * full, 0) == 2 * full
    model, card = catalog_model("gemma-2-9b"), gpu("h100")
    now = serve(model, card, engine="sglang", context=8192, layouts=False).replica
    assert now.kv_tokens == int(now.available_kv_bytes_per_gpu // (1.8 * full))


def test_sglang_vision_models_get_a_smaller_fraction():
    """memory_hook.adjust_mem_fraction_for_vlm, by hand for Qwen2.5-VL-7B's tower (32 blocks of
    1,280): 32 x 1,280^2 / (24 x 1,024^2) = 2.083, 1 - 0.1 x 1.083 = 0.892, x 0.95 = 0.847."""
    model = catalog_model("qwen2.5-vl-7b")
    assert abs(vision_factor(model.config) - 0.95 * (1 - 0.1 * (32 * 1280**2 / (24 * 1024**2) - 1))) < 1e-12
    assert vision_factor({}) == 1.0 and vision_factor({"vision_config": "x"}) == 1.0
    plan = serve(model, gpu("h100"), engine="sglang", context=8192, layouts=False)
    assert abs(plan.utilization - 0.83 * 0.8470833) < 1e-6


def test_engine_versions_one_table():
    """Each engine takes its own versions, the current one by default; any other is refused
    with the accepted ones, in English and French."""
    model, card = catalog_model("llama-3.1-8b"), gpu("h100")
    for engine, versions in ENGINE_VERSIONS.items():
        assert serve(model, card, engine=engine, context=8192, layouts=False).engine_version == versions[0]
        for version in versions:
            assert serve(model, card, engine=engine, context=8192, layouts=False,
                         engine_version=version).engine_version == version
    with pytest.raises(CalculatorError) as error:
        serve(model, card, engine="sglang", engine_version="0.19")
    assert "0.5.21, 0.4.6" in error.value.message("en") and "0.5.21, 0.4.6" in error.value.message("fr")


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
