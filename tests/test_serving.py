"""The serving engines' accounting (vLLM V1 as of 0.19): KV bytes per token and pages by hand
for each kind of attention, the profile run, blocks and concurrency, one 70B deployment
worked out by hand, and the published startup logs the benchmark claims."""

from __future__ import annotations

import math

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.engines import (KvGroup, kv_bytes_per_token_per_gpu, kv_groups, max_sequences, weights_per_gpu)
from calculator.core.units import GIB
from calculator.serving.vllm import profile_peak
from calculator.serving.plan import serve

H100 = gpu("h100")


def plan(key: str, **options):
    """vLLM 0.19's accounting, the one the published logs and the hand computations follow."""
    return serve(catalog_model(key), H100, **{"engine_version": "0.19", **options})


# -- KV bytes per token and pages, by hand --------------------------------------------------------

def test_mha_llama_2_7b():
    """Multi-head attention: 32 layers x 2 (K and V) x 32 heads x 128 x 2 bytes."""
    assert plan("llama-2-7b", context=4096).kv_bytes_per_token == 32 * 2 * 32 * 128 * 2 == 524_288
    (group,) = kv_groups(catalog_model("llama-2-7b").spec, 1, 2)
    assert (group.kind, group.layers, group.page_bytes) == ("full", 32, 2 * 16 * 32 * 128 * 2)
    # tensor parallelism splits the heads: half per GPU at TP2
    assert plan("llama-2-7b", tensor=2, context=4096).replica.kv_bytes_per_token_per_gpu == 524_288 // 2


def test_gqa_llama_3_1_8b():
    """Grouped-query attention: 8 key/value heads of 128 for 32 query heads."""
    spec = catalog_model("llama-3.1-8b").spec
    assert plan("llama-3.1-8b", context=8192).kv_bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_token_per_gpu(spec, 4, 2) == 32 * 2 * 2 * 128 * 2
    # beyond 8 GPUs each keeps one whole head: replicated, not split further
    assert kv_bytes_per_token_per_gpu(spec, 16, 2) == 32 * 2 * 1 * 128 * 2 == 16_384
    # an fp8 cache holds one byte per number
    assert plan("llama-3.1-8b", context=8192, kv_dtype="fp8").kv_bytes_per_token == 65_536


def test_mqa_falcon_and_starcoder():
    """Multi-query attention: one key/value head, which every tensor-parallel rank keeps whole."""
    assert plan("falcon-7b", context=2048).kv_bytes_per_token == 32 * 2 * 1 * 64 * 2 == 8_192
    starcoder = catalog_model("starcoder").spec
    assert kv_bytes_per_token_per_gpu(starcoder, 1, 2) == 40 * 2 * 1 * 128 * 2 == 20_480
    assert kv_bytes_per_token_per_gpu(starcoder, 4, 2) == 20_480


def test_sliding_window_mistral():
    """Every layer slides over 4096 tokens: one group of 32 layers; a sequence keeps
    window - 1 + a prefill chunk of max_num_batched_tokens, plus one block."""
    spec = catalog_model("mistral-7b-v0.1").spec
    (group,) = kv_groups(spec, 1, 2)
    assert (group.kind, group.window, group.layers, group.page_bytes) == ("sliding", 4096, 32, 2 * 16 * 8 * 128 * 2)
    assert plan("mistral-7b-v0.1", context=8192).kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert group.blocks_per_sequence(8192, 8192) == 8192 // 16 + 1
    assert group.blocks_per_sequence(32768, 8192) == math.ceil((4095 + 8192) / 16) + 1 == 769
    assert group.blocks_per_sequence(32768, 2048) == math.ceil((4095 + 2048) / 16) + 1 == 385


def test_sliding_window_gemma_2_the_logged_run():
    """21 full and 21 sliding layers with the same page: two groups of 21 (the hybrid
    allocator). With 21,110 blocks vLLM 0.19 logged 168,880 tokens and 20.60x at 8,192."""
    spec = catalog_model("gemma-2-9b").spec
    groups = kv_groups(spec, 1, 2)
    assert sorted((g.kind, g.layers) for g in groups) == [("full", 21), ("sliding", 21)]
    assert {g.page_bytes for g in groups} == {2 * 16 * 8 * 256 * 2}
    assert plan("gemma-2-9b", context=8192).kv_bytes_per_token == 42 * 2 * 8 * 256 * 2 == 344_064
    need = sum(g.blocks_per_sequence(8192, 8192) for g in groups)
    assert need == 512 + 513
    assert round(21_110 / need, 2) == 20.60 and 21_110 // len(groups) * 16 == 168_880


def test_mla_deepseek_v2_lite():
    """Latent attention: one latent of kv_lora_rank + qk_rope_head_dim (512 + 64) per layer,
    no separate K and V, and not split by tensor parallelism."""
    spec = catalog_model("deepseek-v2-lite").spec
    (group,) = kv_groups(spec, 1, 2)
    assert (group.kind, group.page_bytes) == ("mla", 16 * 576 * 2)
    assert plan("deepseek-v2-lite", context=8192).kv_bytes_per_token == 27 * 576 * 2 == 31_104
    assert kv_bytes_per_token_per_gpu(spec, 2, 2) == 31_104


def test_blocks_and_sequences_are_block_aware():
    group = (KvGroup("full", 32, 2 * 16 * 8 * 128 * 2),)
    # 1,000 tokens take 63 blocks (62.5 rounded up); one block is vLLM's null block
    assert max_sequences(64, group, 1000, 8192) == 1
    assert max_sequences(63, group, 1000, 8192) == 0
    assert max_sequences(1 + 63 * 10, group, 1000, 8192) == 10
    # prefix caching: 960 shared tokens (60 full blocks) are stored once
    assert max_sequences(1 + 63 * 10, group, 1000, 8192, shared_prefix=960) == 1 + (630 - 63) // 3


def test_context_beyond_the_models_positions_is_refused():
    with pytest.raises(CalculatorError) as error:
        plan("llama-2-7b", context=4097)
    assert error.value.code == "context_too_long"
    assert "4\u202f096 positions" in error.value.message("fr")  # numbers grouped in the reader's language


@pytest.mark.parametrize("options,code", [
    ({"tensor": 3}, "tp_degree"),
    ({"gpus": 6, "tensor": 4}, "serve_gpus_multiple"),
    ({"utilization": 0}, "bad_fraction"),
    ({"utilization": 1.2}, "bad_fraction"),
    ({"users": 0}, "out_of_range"),
    ({"kv_dtype": "int4"}, "unknown_choice"),
    ({"dtype": "float64"}, "unknown_dtype"),
    ({"engine": "tgi"}, "unknown_choice"),
    ({"cpu_offload_gib": -1}, "bad_offload"),
])
def test_bad_input_is_a_calculator_error(options, code):
    with pytest.raises(CalculatorError) as error:
        plan("llama-3.1-8b", context=4096, **options)
    assert error.value.code == code


@pytest.mark.parametrize("fmt,layout", [("gptq-4bit", "int4"), ("awq-4bit", "int4"), ("fp8-tensor", "float8")])
def test_the_case_formats_are_served_in_the_engines_layout(fmt, layout):
    """A chapter's case may hold a quantization format: GPTQ and AWQ are vLLM's w4a16, the fp8
    tensor format its float8 layout (fp8-block128 has its own: test_serving_formats); the plan is then the plain layout's, to the byte."""
    served = plan("llama-3.1-8b", context=4096, dtype=fmt)
    assert served.dtype == layout
    # AWQ keeps one 4-bit zero point per 128 weights (qzeros int32 [in / 128, out / 8]): Llama 3.1
    # 8B's 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) quantized weights / 256 bytes
    zeros = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) // 256 if fmt == "awq-4bit" else 0
    assert zeros in (0, 27_262_976)
    plain = plan("llama-3.1-8b", context=4096, dtype=layout).replica.weights_bytes_per_gpu
    assert abs(served.replica.weights_bytes_per_gpu - plain - zeros) <= 1


@pytest.mark.parametrize("fmt", ["bnb-nf4", "bnb-int8", "Q4_K"])
def test_formats_the_engines_lay_out_otherwise_are_refused_in_both_languages(fmt):
    with pytest.raises(CalculatorError) as error:
        plan("llama-3.1-8b", context=4096, dtype=fmt)
    assert error.value.code == "serve_format"
    assert fmt in error.value.message("en") and "GPTQ" in error.value.message("fr")


def test_a_model_that_does_not_generate_is_refused():
    with pytest.raises(CalculatorError) as error:
        serve(catalog_model("bert-base-cased"), H100)
    assert error.value.code == "serve_no_decoder"


# -- the profile run ------------------------------------------------------------------------------

def test_profile_peak_is_the_sampler_for_a_large_vocabulary():
    """8,192 tokens over 1,024 requests: the last hidden states, one row per request and the
    sampler's 13 bytes per logit beyond the bfloat16 logits (vLLM 0.19 logged 1.89 GiB)."""
    spec = catalog_model("llama-3.1-8b").spec
    profile = profile_peak(spec, "bfloat16", 1, 8192, 1024)
    expected = 8192 * 4096 * 2 + 1024 * 4096 * 2 + 1024 * 128_256 * (2 + 13)
    assert (profile.moment, profile.peak_bytes) == ("sampler", expected)
    assert abs(expected / GIB - 1.89) < 0.02
    # few requests and a wide MLP: the forward's gate, up and product take over
    small = profile_peak(spec, "bfloat16", 1, 8192, 16)
    assert small.moment == "forward"
    assert small.peak_bytes == 2 * 8192 * 4096 * 2 + 3 * 8192 * 14336 * 2


def test_cpu_offload_moves_weights_into_the_pool():
    base = plan("llama-3.1-8b", context=8192).replica
    offloaded = plan("llama-3.1-8b", context=8192, cpu_offload_gib=4).replica
    assert base.weights_bytes_per_gpu - offloaded.weights_bytes_per_gpu == 4 * GIB
    assert offloaded.available_kv_bytes_per_gpu - base.available_kv_bytes_per_gpu == 4 * GIB


# -- Llama-3.1-70B, 32 users x 4,096 tokens on H100s, by hand -------------------------------------

def test_llama_70b_for_32_users_of_4k_tokens_by_hand():
    model = catalog_model("llama-3.1-70b")
    summary = model.summary
    # weights per GPU at TP4: every linear and both vocabulary matrices split in four, norms and
    # buffers whole, vLLM's cos/sin table (131,072 positions x 128, bfloat16) once
    layer = 8192 * (8192 + 1024 + 1024 + 8192) + 3 * 8192 * 28672
    linears = 80 * layer + 2 * 128_256 * 8192
    norms = (2 * 80 + 1) * 8192
    assert linears + norms == summary.parameters
    weights = linears // 4 * 2 + norms * 2 + summary.buffer_bytes_at("bfloat16") + 131_072 * 128 * 2
    assert weights_per_gpu(summary, model.spec, model.config, "bfloat16", 4) == weights
    # the card: PyTorch's total x 0.9, less the weights, the profile peak and the non-torch growth
    requested = math.ceil(H100.total_bytes * 0.9)
    sampler = 8192 * 8192 * 2 + 1024 * 8192 * 2 + 1024 * 128_256 * 15
    available = requested - weights - sampler - round(2.1 * GIB)
    per_block = 80 * (2 * 16 * (8 // 4) * 128 * 2)  # 80 layers, 2 key/value heads per GPU
    blocks = available // per_block
    sequences = (blocks - 1) // (4096 // 16)
    deployment = plan("llama-3.1-70b", context=4096, users=32)
    by_tensor = {lay.tensor: lay for lay in deployment.layouts}
    assert sorted(by_tensor) == [1, 2, 4, 8, 16]
    tp4 = by_tensor[4]
    assert (tp4.weights_bytes_per_gpu, tp4.kv_tokens, tp4.sequences_per_replica) == (weights, blocks * 16, sequences)
    assert (blocks * 16, sequences) == (449_552, 109)
    assert (tp4.replicas, tp4.gpus) == (1, 4)
    # one GPU cannot hold 131 GiB of weights; two hold 2 sequences each, so 16 pairs
    assert by_tensor[1].gpus is None and by_tensor[1].sequences_per_replica == 0
    assert (by_tensor[2].sequences_per_replica, by_tensor[2].replicas, by_tensor[2].gpus) == (2, 16, 32)
    assert deployment.best_layout == tp4
    assert (deployment.verdict, deployment.reason) == ("too_big", "no_cache_room")  # on one GPU
    assert plan("llama-3.1-70b", context=4096, users=32, gpus=4).verdict == "fits"
    # 8 GPUs as two TP4 replicas serve twice the sequences
    assert plan("llama-3.1-70b", context=4096, users=32, gpus=8, tensor=4).max_concurrent_sequences == 2 * 109


def test_verdict_tight_inside_the_headroom_and_too_many_users():
    assert plan("llama-3.1-8b", context=8192, utilization=0.95).verdict == "tight"
    crowded = plan("llama-3.1-8b", context=8192, users=10_000)
    assert (crowded.verdict, crowded.reason) == ("too_big", "too_many_users")
    huge = plan("llama-3.1-8b", context=131_072, utilization=0.25)
    assert (huge.verdict, huge.reason) == ("too_big", "context_exceeds_pool")


# -- the published logs ---------------------------------------------------------------------------

def test_published_logs_stay_within_target():
    """Every run the benchmark compares (bench/data/serving_logs.json) is within 5% in KV
    cache tokens; at least 10 of them, from vLLM and SGLang."""
    from bench.serving import TARGET, comparisons, compared_rows, skipped_rows

    results = comparisons()
    assert len(results) >= 10 and {c.engine for c in results} == {"vllm", "sglang"}
    misses = [(c.id, f"{c.error:+.2%}") for c in results if not c.within_target]
    assert misses == [], misses
    assert TARGET == 0.05
    for row in compared_rows() + skipped_rows():
        assert row["source_url"] and row["engine_version"] and row["flags"]
    assert all(row["skip"] for row in skipped_rows())
