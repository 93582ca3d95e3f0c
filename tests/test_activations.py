"""The activation peak: against live tensor bytes of real models run on the CPU, against hand
computations for real configs, and properties the inverse questions rely on."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import pytest
import torch
import transformers

from calculator.models import catalog
from calculator.models.architecture import spec_from_config
from calculator.memory.inference import (activation_peak_bytes, can_generate, inference_memory, kv_cache_bytes, largest_batch,
                                  largest_context, peak_phase)
from bench.measure import LiveBytes, measure_inference
from calculator.models.meta import make_config
from tests.conftest import load_test_config


def test_live_bytes_ignores_weights_and_views_of_them():
    layer = torch.nn.Linear(1000, 1000)  # 4 MB of weights, made before measuring
    x = torch.ones(2, 1000)
    with torch.no_grad(), LiveBytes() as live:
        y = layer(x)  # linear hands mm a transposed view of the weight: not a new tensor
    assert live.peak == 2 * 1000 * 4
    assert y.shape == (2, 1000)


def test_live_bytes_counts_a_storage_once_and_releases_it():
    with LiveBytes() as live:
        a = torch.ones(1000)  # 4000 bytes
        b = a.view(10, 100)  # a view: the same storage
        c = a * 2  # a new tensor: 4000 more
        del a, b
        after = live.current
    assert live.peak == 8000 and after == 4000
    assert c.sum() == 2000


SMALL = {
    "llama": lambda: load_test_config("tiny-llama"),
    "mistral": lambda: {**load_test_config("tiny-llama"), "architectures": ["MistralForCausalLM"],
                        "model_type": "mistral", "sliding_window": 24},
    "gemma2": lambda: load_test_config("tiny-gemma2"),
    "mixtral": lambda: load_test_config("tiny-mixtral"),
    "gpt2": lambda: {**catalog.config("gpt2"), "n_embd": 128, "n_head": 4, "n_layer": 2, "vocab_size": 500},
    "t5": lambda: {**catalog.config("t5-small"), "d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4,
                   "d_kv": 16, "vocab_size": 300},
}
CASES = [(name, attention, mode, dtype) for name in SMALL for attention in ("sdpa", "eager")
         for mode in ("generate", "loglikelihood") for dtype in ("float32", "bfloat16")
         if (attention, dtype) in (("sdpa", "float32"), ("eager", "bfloat16"))]


@pytest.mark.parametrize("name,attention,mode,dtype", CASES)
def test_peak_equals_live_bytes_of_a_real_run(name, attention, mode, dtype):
    config = SMALL[name]()
    cfg = make_config(config)
    spec = spec_from_config(cfg)
    torch.manual_seed(0)
    model = getattr(transformers, config["architectures"][0])._from_config(
        cfg, dtype=getattr(torch, dtype), attn_implementation=attention if spec.sdpa else "eager").eval()
    batch, tokens = 2, 40
    peak, cache = measure_inference(model, batch, tokens, mode)
    decoder = 1 if spec.kind == "encoder-decoder" and mode == "generate" else None
    predicted = peak_phase(spec, batch, tokens, dtype, attention, mode, decoder_tokens=decoder).total_bytes
    assert predicted - cache == pytest.approx(peak - cache, rel=0.01), f"peak at {peak_phase}"


LLAMA_2_7B = catalog.stored_spec("llama-2-7b")  # 32 layers, hidden 4096, 32 heads of 128, MLP 11008


def test_llama_2_7b_prefill_peak_by_hand():
    # bf16, one sequence of 4096 tokens, SDPA: the last layer's MLP holds the peak
    n, h, a = 4096, 4096, 2
    held = (n * h * a  # the embeddings the model keeps
            + 2 * n * 128 * a  # rotary cos and sin, one row per sequence in generate
            + 2 * n * 8  # generate's int64 position ids and their copy
            + 3 * n * h * a)  # the last layer's input, the residual after attention, the normed input
    mlp = 3 * n * 11008 * a  # act(gate), up, and their product
    cache = 2 * 32 * 32 * 128 * n * a
    phase = peak_phase(LLAMA_2_7B, 1, 4096, "bfloat16", "sdpa", "generate")
    assert phase.name == "mlp"
    assert phase.total_bytes == cache + held + mlp
    assert activation_peak_bytes(LLAMA_2_7B, 1, 4096, "bfloat16") == held + mlp


def test_eager_attention_scores_by_hand():
    # eager: matmul then scale (2 score tensors), + mask, then the float32 softmax and its bf16 cast
    # while the masked scores are held: 2 + 4 + 2 bytes per score; the mask is batch x T x T in bf16
    t, a = 4096, 2
    scores = 32 * t * t * 8
    held = t * 4096 * a + 2 * t * 128 * a + 2 * t * 8 + t * t * a + t * 4096 * a  # embeddings, rotary, ids, mask, input
    local = t * 4096 * a + t * 32 * 128 * a  # normed input, queries (32 KV heads: no repeat)
    phase = peak_phase(LLAMA_2_7B, 1, t, "bfloat16", "eager", "generate")
    assert phase.name == "attention"
    assert phase.total_bytes == 2 * 32 * 32 * 128 * t * a + held + local + scores


def test_log_likelihood_logits_by_hand():
    spec = catalog.stored_spec("llama-3-8b")  # vocabulary 128,256
    b, t = 4, 2048
    phase = peak_phase(spec, b, t, "bfloat16", "sdpa", "loglikelihood")
    assert phase.name == "log_probabilities"
    # bf16 logits, their float32 copy, the float32 log-probabilities; the output still holds the cache
    assert phase.total_bytes == kv_cache_bytes(spec, b, t, "bfloat16") + b * t * 128_256 * (2 + 4 + 4)
    fp32 = peak_phase(spec, b, t, "float32", "sdpa", "loglikelihood")  # no copy: .float() returns the logits
    assert fp32.total_bytes == kv_cache_bytes(spec, b, t, "float32") + b * t * 128_256 * (4 + 4)


def test_generation_keeps_only_the_last_position_logits():
    spec = catalog.stored_spec("llama-3-8b")
    generate = activation_peak_bytes(spec, 4, 2048, "bfloat16", mode="generate")
    scored = activation_peak_bytes(spec, 4, 2048, "bfloat16", mode="loglikelihood")
    assert scored > 3 * generate


def test_sliding_window_layers_hold_the_whole_prompt_during_prefill():
    spec = catalog.stored_spec("mistral-7b-v0.1")  # window 4096
    t = 16_384
    per_token = 2 * 32 * 8 * 128 * 2
    kept = kv_cache_bytes(spec, 1, t, "bfloat16")
    assert kept == 4095 * per_token
    phase = peak_phase(spec, 1, t, "bfloat16", "sdpa", "generate")
    assert phase.cache_bytes == t * per_token  # a view of the prompt's keys keeps their storage


def test_models_without_sdpa_run_eager():
    gemma = catalog.stored_spec("gemma-2-9b")
    assert not gemma.sdpa
    summary = catalog.stored_summary("gemma-2-9b")
    memory = inference_memory(summary, gemma, 1, 4096, attention="sdpa")
    assert memory.attention_used == "eager"
    assert memory.total_bytes == inference_memory(summary, gemma, 1, 4096, attention="eager").total_bytes


def test_the_existing_widget_calls_still_work():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    memory = inference_memory(summary, spec, 8, 1280, "int4")
    assert memory.total_bytes == memory.weights_bytes + memory.kv_cache_bytes + memory.activation_peak_bytes
    largest = largest_batch(summary, spec, 24 * 2**30, 1280, dtype="int4")
    assert inference_memory(summary, spec, largest, 1280, "int4").total_bytes <= 24 * 2**30
    assert inference_memory(summary, spec, largest + 1, 1280, "int4").total_bytes > 24 * 2**30


MODELS = [entry.key for entry in catalog.entries()]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 64), st.integers(1, 40_000), st.sampled_from(["sdpa", "eager"]),
       st.sampled_from(["generate", "loglikelihood"]), st.sampled_from(["bfloat16", "float32", "int4"]))
def test_memory_never_falls_when_batch_or_context_grows(model, batch, context, attention, mode, dtype):
    summary, spec = catalog.stored_summary(model), catalog.stored_spec(model)
    # a model that does not generate runs forward; no model is asked past its positions
    mode = mode if can_generate(spec) else "forward"
    context = min(context, spec.max_positions - 1) if spec.max_positions else context
    options = {"dtype": dtype, "attention": attention, "mode": mode}
    base = inference_memory(summary, spec, batch, context, **options).total_bytes
    assert inference_memory(summary, spec, batch + 1, context, **options).total_bytes >= base
    assert inference_memory(summary, spec, batch, context + 1, **options).total_bytes >= base
    assert inference_memory(summary, spec, batch, context, **{**options, "attention": "eager"}).total_bytes >= \
        inference_memory(summary, spec, batch, context, **{**options, "attention": "sdpa"}).total_bytes


def test_largest_context_is_the_edge():
    summary, spec = catalog.stored_summary("llama-3.1-8b"), catalog.stored_spec("llama-3.1-8b")
    capacity = 24 * 2**30
    t = largest_context(summary, spec, capacity, 4)
    assert 0 < t < spec.max_positions
    assert inference_memory(summary, spec, 4, t).total_bytes <= capacity < inference_memory(summary, spec, 4, t + 1).total_bytes
