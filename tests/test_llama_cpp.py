"""The llama.cpp planner against hand computations from llama.cpp's rules (calculator/distributed/llama_cpp.py
cites them): bytes per layer in a GGUF type, the KV cache per layer, the output layer, the
compute buffer, the largest -ngl for a card, and the slowdown of decoding."""

from __future__ import annotations

import json

import pytest

from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.distributed.llama_cpp import (DEFAULT_CPU_GBS, decode_seconds, gguf_layout, largest_ngl, padded_cells,
                                  plan_llama_cpp, row_bytes, split)
from calculator.models.seam import catalog_model
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

MIB = 2**20
# Llama-3.1-8B in Q4_K: hidden 4096, 8 key/value heads of 128, FFN 14336, vocabulary 128256.
LAYER = (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096) * 144 // 256 + 2 * 4096 * 4  # + two F32 norms
OUTPUT = 128256 * 4096 // 256 * 210 + 4096 * 4  # Q6_K output matrix and the F32 final norm
EMBEDDINGS = 128256 * 4096 // 256 * 144  # Q4_K, in CPU memory
LOGITS = 512 * (128256 + 4096) * 4


def llama_8b():
    model = catalog_model("llama-3.1-8b")
    return model.summary, model.spec


def test_llama_3_1_8b_q4_k_layout_by_hand():
    layout = gguf_layout(*llama_8b(), "Q4_K", 8192)
    assert LAYER == 122_716_160 and layout.layer_bytes == (LAYER,) * 32
    assert layout.output_bytes == OUTPUT == 430_956_544 and layout.head_type == "Q6_K"
    # llama.cpp logs "CPU buffer size = 281.81 MiB" for this model's token embeddings in Q4_K
    assert layout.input_bytes == EMBEDDINGS and round(EMBEDDINGS / MIB, 2) == 281.81
    # one layer's K and V for 8192 cells: 8192 x 1024 values x 2 bytes each
    assert layout.cells == 8192 and layout.kv_bytes == (8192 * 1024 * 2 * 2,) * 32
    # "CUDA0 compute buffer size = 258.50 MiB" for Llama-3-8B at the default micro-batch of 512
    assert layout.logits_buffer_bytes == LOGITS and LOGITS / MIB == 258.5
    assert layout.file_bytes == EMBEDDINGS + 32 * LAYER + OUTPUT


def test_everything_fits_a_t4_at_8192():
    plan = plan_llama_cpp(*llama_8b(), gpu("t4"), "Q4_K", 8192)
    assert plan.ngl == 33 and plan.all_on_gpu and plan.slowdown == 1.0
    assert plan.split.gpu_bytes == 32 * (LAYER + 33_554_432) + OUTPUT + LOGITS == 5_702_672_384
    assert plan.split.cpu_bytes == EMBEDDINGS
    assert plan.command() == "llama-server -m model.gguf -ngl 33 -c 8192"


def test_largest_ngl_at_131072_on_a_t4_by_hand():
    """The T4 gives 14,909 MiB less its context, less 5%. The context is the Turing median of
    published out-of-memory messages, the middle of three T4 readings (tsugumi-sys/SA-ConvLSTM-
    Pytorch#22: 13.94 GiB in use − 13.20 GiB allocated − 621.20 MiB unallocated = 143,193,539
    bytes): 15,490,026,045 usable, 14,715,524,742 after the headroom. The output layer and the
    compute buffer come first, then 659,587,072 bytes per layer (weights and 512 MiB of cache):
    21 layers, so -ngl 22; 11 layers stay in CPU memory. (With the former 1,474 MB context: 19
    layers, -ngl 20.)"""
    card = gpu("t4")
    limit = Budget(card).limit_bytes
    context = round(13.94 * 2**30) - round(13.20 * 2**30) - round(621.20 * 2**20)
    usable = 14909 * 2**20 - context
    assert context == 143_193_539 and limit == usable - -(-usable * 5 // 100) == 14_715_524_742
    per_layer = LAYER + 131072 * 1024 * 2 * 2
    layers = (limit - OUTPUT - LOGITS) // per_layer
    plan = plan_llama_cpp(*llama_8b(), card, "Q4_K", 131072)
    assert layers == 21 and plan.ngl == 22 and plan.split.gpu_layers == 21
    assert plan.split.gpu_bytes == 21 * per_layer + OUTPUT + LOGITS <= limit
    assert plan.split.cpu_bytes == 11 * per_layer + EMBEDDINGS
    gpu_read, cpu_read = 21 * per_layer + OUTPUT, 11 * per_layer
    seconds = gpu_read / 320e9 + cpu_read / (DEFAULT_CPU_GBS * 1e9)
    assert plan.seconds_per_token == pytest.approx(seconds)
    assert plan.slowdown == pytest.approx(seconds / ((32 * per_layer + OUTPUT) / 320e9))
    assert plan.command() == "llama-server -m model.gguf -ngl 22 -c 131072"


def test_ngl_counts_the_output_layer_and_takes_the_last_layers():
    """src/llama-model.cpp: -ngl N puts the last N of the n_layer + 1 slots on the GPU."""
    layout = gguf_layout(*llama_8b(), "Q4_K", 4096)
    none, output_only, two = split(layout, 0), split(layout, 1), split(layout, 3)
    assert none.gpu_bytes == 0 and not none.output_on_gpu and none.cpu_compute_bytes == LOGITS
    assert output_only.output_on_gpu and output_only.gpu_layers == 0 and output_only.gpu_weights_bytes == OUTPUT
    assert two.gpu_layers == 2 and two.gpu_weights_bytes == OUTPUT + 2 * LAYER
    assert split(layout, 99).ngl == 33
    assert largest_ngl(layout, 0) == 0 and largest_ngl(layout, OUTPUT + LOGITS) == 1


@pytest.mark.parametrize("cache,row", [("f16", 2048), ("q8_0", 1024 // 32 * 34), ("q4_0", 1024 // 32 * 18)])
def test_cache_types(cache, row):
    assert row_bytes(cache, 1024) == row
    layout = gguf_layout(*llama_8b(), "Q4_K", 8000, cache)
    assert layout.cells == 8192 and layout.kv_bytes[0] == 8192 * 2 * row
    plan = plan_llama_cpp(*llama_8b(), gpu("h100"), "Q4_K", 8000, cache)
    assert (cache != "f16") == ("--cache-type-v" in plan.command())


def test_context_is_padded_to_256():
    assert [padded_cells(c) for c in (1, 256, 257, 8193)] == [256, 256, 512, 8448]


def test_gemma_2_sliding_window_layers_keep_fewer_cells():
    """Gemma 2: 21 sliding-window layers (window 4096) alternate with 21 global ones; with
    llama-server's 4 slots the window layers keep min(n_ctx, 4096 x 4 + 512) cells."""
    model = catalog_model("gemma-2-9b")
    layout = gguf_layout(model.summary, model.spec, "Q4_K", 32768)
    per_cell = 8 * 256 * 2 * 2
    assert layout.kv_bytes[:4] == (16896 * per_cell, 32768 * per_cell) * 2
    assert sum(layout.kv_bytes) == 21 * (16896 + 32768) * per_cell


def test_tied_output_is_a_copy_of_the_embeddings():
    model = catalog_model("qwen2.5-0.5b")  # tied embeddings, hidden 896: Q8_0 output (896 % 256 != 0)
    layout = gguf_layout(model.summary, model.spec, "Q8_0", 4096)
    embeddings = 151936 * 896 // 32 * 34
    assert layout.input_bytes == embeddings and layout.output_bytes == embeddings + 896 * 4
    assert layout.file_bytes == embeddings + sum(layout.layer_bytes) + 896 * 4


def test_a_token_reads_only_its_experts():
    model = catalog_model("mixtral-8x7b-v0.1")  # 2 of 8 experts per token
    layout = gguf_layout(model.summary, model.spec, "Q4_K", 4096)
    expert = 3 * 14336 * 4096 * 144 // 256  # one expert's three matrices, per layer
    assert sum(layout.layer_bytes) - sum(layout.layer_read_bytes) == 32 * 6 * expert
    plan = plan_llama_cpp(model.summary, model.spec, gpu("rtx4090"), "Q4_K", 4096)
    gpu_s, all_s = decode_seconds(layout, plan.split, 1008, DEFAULT_CPU_GBS)
    assert plan.seconds_per_token == pytest.approx(gpu_s) and 1 < plan.slowdown < 10


def test_bad_inputs_are_refused():
    summary, spec = llama_8b()
    for args in (("Q5", 8192), ("Q4_K", 0), ("Q4_K", True)):
        with pytest.raises(CalculatorError):
            gguf_layout(summary, spec, *args)
    with pytest.raises(CalculatorError):
        gguf_layout(summary, spec, "Q4_K", 8192, "q3_k")
    with pytest.raises(CalculatorError):
        plan_llama_cpp(summary, spec, gpu("t4"), "Q4_K", 8192, "f16", 0)
    bert = catalog_model("bert-base-cased")
    with pytest.raises(CalculatorError):
        gguf_layout(bert.summary, bert.spec, "Q4_K", 512)


def test_cli_equals_the_planner():
    data = json.loads(cli("llama-cpp", "llama-3.1-8b", "--gpu", "t4", "--type", "Q4_K", "--context", "131072",
                          "--json").stdout)
    plan = plan_llama_cpp(*llama_8b(), gpu("t4"), "Q4_K", 131072)
    assert data["ngl"] == 22 and data["gpu_bytes"] == plan.split.gpu_bytes and data["cpu_bytes"] == plan.split.cpu_bytes
    assert data["command"] == "llama-server -m model.gguf -ngl 22 -c 131072"
    assert data["slowdown"] == pytest.approx(plan.slowdown)
    text = cli("llama-cpp", "llama-3.1-8b", "--gpu", "t4", "--context", "131072").stdout
    assert "Largest -ngl: 22 of 33" in text and text.rstrip().endswith("-ngl 22 -c 131072")
    for args in (("--type", "Q5"), ("--context", "0"), ("--cpu-bandwidth", "-1"), ("--cache-type", "q3_k")):
        bad = cli("llama-cpp", "gpt2", *args)
        assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
