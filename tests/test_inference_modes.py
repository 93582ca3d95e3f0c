"""Inference as people run it: a prompt then new tokens, a static cache, models
that only run forward, contexts past a model's positions, quantized weights as they run, and
bfloat16 on a card without bfloat16 tensor cores. Each figure against a hand computation."""

from __future__ import annotations

import json

import pytest

from calculator.models import catalog
from calculator.models.architecture import head_of
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.memory.inference import (activation_peak_bytes, can_generate, inference_memory, kv_cache_bytes, layer_cache_bytes,
                                  peak_phase)
from calculator.models.seam import catalog_model
from calculator.memory.quantization import matmul_transient_bytes, quantize_model
from calculator.memory.speed import prefill
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

LLAMA = catalog_model("llama-3-8b")


def test_the_cache_grows_to_prompt_plus_answer():
    memory = inference_memory(LLAMA.summary, LLAMA.spec, 2, prompt=1000, new_tokens=24)
    assert memory.context == 1024 and memory.kv_cache_bytes == kv_cache_bytes(LLAMA.spec, 2, 1024)
    # 2 sequences x 1024 tokens x 32 layers x 8 key/value heads x 128 x 2 (K and V) x 2 bytes
    assert memory.kv_cache_bytes == 2 * 1024 * 32 * 8 * 128 * 2 * 2
    # the prefill of the 1,000-token prompt sets the peak, with the prompt's cache only
    prefill_peak = peak_phase(LLAMA.spec, 2, 1000)
    assert memory.total_bytes == memory.weights_bytes + prefill_peak.total_bytes
    assert memory.total_bytes == memory.weights_bytes + memory.kv_cache_bytes + memory.activation_peak_bytes


def test_a_long_answer_peaks_at_the_last_step():
    memory = inference_memory(LLAMA.summary, LLAMA.spec, 8, prompt=16, new_tokens=4000)
    assert memory.peak_moment == "decode"
    # the whole cache, plus one layer's keys and values copied by torch.cat as it grows
    one_layer = 8 * 4016 * 8 * 128 * 2 * 2
    assert layer_cache_bytes(LLAMA.spec, 8, 4016, "bfloat16") == one_layer
    assert memory.total_bytes > memory.weights_bytes + memory.kv_cache_bytes + one_layer


def test_a_static_cache_is_there_from_the_start():
    dynamic = inference_memory(LLAMA.summary, LLAMA.spec, 4, prompt=2000, new_tokens=2000)
    static = inference_memory(LLAMA.summary, LLAMA.spec, 4, prompt=2000, new_tokens=2000, cache="static")
    assert static.kv_cache_bytes == dynamic.kv_cache_bytes == kv_cache_bytes(LLAMA.spec, 4, 4000)
    # the prefill of 2,000 tokens runs with the whole 4,000-token cache already allocated
    prompt_activation = activation_peak_bytes(LLAMA.spec, 4, 2000)
    assert static.peak_moment != "decode"
    assert static.total_bytes == static.weights_bytes + static.kv_cache_bytes + prompt_activation
    assert static.total_bytes > dynamic.total_bytes


def test_models_that_do_not_generate_run_forward():
    bert, vit = catalog_model("bert-base-cased"), catalog_model("vit-base-patch16-224")
    assert not can_generate(bert.spec) and not can_generate(vit.spec) and can_generate(LLAMA.spec)
    memory = inference_memory(bert.summary, bert.spec, 8, 512)
    assert memory.mode == "forward" and memory.kv_cache_bytes == 0
    with pytest.raises(CalculatorError) as error:
        inference_memory(bert.summary, bert.spec, 8, 512, mode="generate")
    assert error.value.code == "cannot_generate"
    assert (head_of(["BertForSequenceClassification"]), head_of(["LlamaForCausalLM"]), head_of(["BartModel"])) == (
        "classifier", "lm", "none")


@pytest.mark.parametrize("key,limit", [("gpt2", 1024), ("bert-base-cased", 512)])
def test_a_context_past_the_positions_is_refused(key, limit):
    model = catalog_model(key)
    with pytest.raises(CalculatorError) as error:
        inference_memory(model.summary, model.spec, 1, limit + 1)
    assert error.value.code == "context_too_long" and f"{limit:,}" in str(error.value)
    assert f"{limit:,}".replace(",", "\u202f") in error.value.message("fr")  # grouped as French writes it
    out = cli("inference", key, "--batch", "1", "--context", str(limit + 1))
    assert out.returncode == 2 and f"{limit:,}" in out.stderr and out.stderr.count("\n") == 1


def test_int8_runs_with_its_int32_products():
    summary, spec = LLAMA.summary, LLAMA.spec
    rows = 4 * 1000
    # widest quantized matrix: the MLP's 4096 -> 14336 projections; bf16 input cast to fp16 (2),
    # its int8 copy (1), float32 row scales (4), the int32 product (4 x out)
    expected = rows * (3 * 4096 + 4 + 4 * 14336)
    assert matmul_transient_bytes(summary, spec, "bnb-int8", rows, act_dtype="bfloat16") == expected
    memory = inference_memory(summary, spec, 4, 1000, dtype="bnb-int8")
    assert memory.weights_bytes == quantize_model(summary, spec, "bnb-int8").total_bytes
    assert memory.quantized_matmul_bytes == expected


def test_four_bit_dequantizes_its_weight_for_a_prompt():
    summary, spec = LLAMA.summary, LLAMA.spec
    widest = 4096 * 14336
    # float32 compute (transformers' default): from 8 rows on, the weight in float32, plus the
    # input and output cast to float32
    assert matmul_transient_bytes(summary, spec, "bnb-nf4", 512, "float32", "bfloat16") == \
        512 * 4 * (4096 + 14336) + widest * 4
    # bfloat16 compute: the fused kernel up to 512 rows, the dequantized weight above
    assert matmul_transient_bytes(summary, spec, "bnb-nf4", 512, "bfloat16", "bfloat16") == 0
    assert matmul_transient_bytes(summary, spec, "bnb-nf4", 513, "bfloat16", "bfloat16") == widest * 2
    # one token per sequence (decoding a batch under 8): the gemv kernel, no dequantized weight
    assert matmul_transient_bytes(summary, spec, "bnb-nf4", 4, "float32", "bfloat16") == 4 * 4 * (4096 + 14336)


def test_published_bitsandbytes_runs_of_octocoder():
    """transformers' "Optimizing LLMs for Speed and Memory" guide prints max_memory_allocated for
    bigcode/octocoder (StarCoder's architecture), 20-token prompt, 60 new tokens, batch 1:
    bfloat16 29.03 GiB, 8-bit 15.22 GiB, 4-bit (fp4, float32 compute) 9.54 GiB."""
    model = catalog_model("starcoder")
    for dtype, measured in (("bfloat16", 29.0260648727417), ("bnb-int8", 15.219234466552734),
                            ("bnb-fp4", 9.543574333190918)):
        memory = inference_memory(model.summary, model.spec, 1, dtype=dtype, prompt=20, new_tokens=60,
                                  attention="eager")
        assert memory.total_bytes / 2**30 == pytest.approx(measured, rel=0.05), dtype


def test_bfloat16_on_a_t4_runs_at_the_float32_rate():
    t4 = gpu("t4")
    bf16 = prefill(LLAMA.summary, LLAMA.spec, t4, "bfloat16", 8, 1024)
    fp16 = prefill(LLAMA.summary, LLAMA.spec, t4, "float16", 8, 1024)
    assert t4.matmul_tflops("bfloat16") == t4.fp32_tflops and not t4.has_bf16_tensor_cores
    assert bf16.compute_seconds == pytest.approx(fp16.compute_seconds * t4.fp16_tflops / t4.fp32_tflops)


def test_cli_prompt_new_tokens_and_formats():
    out = cli("inference", "llama-3-8b", "--batch", "4", "--prompt", "1000", "--new-tokens", "24", "--dtype",
              "bnb-nf4", "--compute-dtype", "bfloat16", "--gpu", "T4", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    expected = inference_memory(LLAMA.summary, LLAMA.spec, 4, dtype="bnb-nf4", prompt=1000, new_tokens=24,
                                bnb_compute_dtype="bfloat16")
    assert data["total_bytes"] == expected.total_bytes and data["weights_format"] == "bnb-nf4"
    assert {"reserved_bytes", "nvidia_smi_bytes", "usable_bytes", "verdict", "largest_batch_tight"} <= set(data)
    both = cli("inference", "gpt2", "--batch", "1", "--context", "10", "--prompt", "5")
    assert both.returncode == 2 and both.stderr.count("\n") == 1
    assert catalog.find("starcoder") is not None
