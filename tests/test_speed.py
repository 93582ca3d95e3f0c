"""The roofline and data-parallel figures, worked out by hand."""

from __future__ import annotations

import json

import pytest

from calculator.models import catalog
from calculator.core.gpus import gpu
from calculator.memory.speed import (attention_flops, data_parallel_training, decode_step, generation, prefill,
                              ring_allreduce_seconds, weight_bytes_read)
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

LLAMA = catalog.stored_summary("llama-2-7b")
LLAMA_SPEC = catalog.stored_spec("llama-2-7b")


def test_decode_step_is_the_slower_of_reading_and_computing():
    h100 = gpu("h100")
    step = decode_step(LLAMA, LLAMA_SPEC, h100, "bfloat16", batch=1, context=1000)
    weights = 6_738_415_616 * 2 + 512  # bf16 weights, rotary buffers kept in float32
    cache = 2 * 32 * 32 * 128 * 1000 * 2  # K and V, 32 layers, 32 heads of 128, 1000 tokens, 2 bytes
    assert step.bytes_moved == weights + cache
    assert step.memory_seconds == pytest.approx((weights + cache) / 3350e9)
    flops = 2 * 6_738_415_616 + 4 * 32 * 32 * 128 * 1000
    assert step.flops == pytest.approx(flops)
    assert step.compute_seconds == pytest.approx(flops / 989e12)
    assert step.bound == "memory" and step.seconds == step.memory_seconds


def test_batching_is_nearly_free_while_memory_bound():
    card = gpu("a100-80gb")
    one = decode_step(LLAMA, LLAMA_SPEC, card, "bfloat16", 1, 512)
    many = decode_step(LLAMA, LLAMA_SPEC, card, "bfloat16", 16, 512)
    assert many.seconds < 2 * one.seconds  # 16 times the tokens for less than twice the time


def test_a_long_prompt_is_compute_bound():
    step = prefill(LLAMA, LLAMA_SPEC, gpu("h100"), "bfloat16", batch=1, prompt=4096)
    assert step.bound == "compute"
    assert step.flops == pytest.approx(2 * 6_738_415_616 * 4096 + attention_flops(LLAMA_SPEC, 4096, 4096) / 2)


def test_generation_totals_prefill_and_steps():
    run = generation(LLAMA, LLAMA_SPEC, gpu("l4"), "bfloat16", batch=4, prompt=100, new_tokens=50)
    assert run.total_seconds == pytest.approx(run.time_to_first_token + 50 * run.time_per_token)
    assert run.tokens_per_second == pytest.approx(4 * 50 / run.total_seconds)


def test_moe_decoding_reads_only_the_routed_experts():
    mixtral, spec = catalog.stored_summary("mixtral-8x7b-v0.1"), catalog.stored_spec("mixtral-8x7b-v0.1")
    experts = mixtral.groups["experts"] * 2
    full = mixtral.total_bytes_at("bfloat16")
    # one token, 2 of 8 experts per layer: a quarter of the expert weights
    assert weight_bytes_read(mixtral, spec, "bfloat16", 1) == pytest.approx(full - experts + experts * 2 / 8, abs=1)
    assert weight_bytes_read(mixtral, spec, "bfloat16", 1000) == pytest.approx(full, rel=1e-9)


def test_ring_allreduce_by_hand():
    # 8 GPUs, 14 GB of gradients, 300 GB/s per direction: 2 * 7/8 * 14e9 / 300e9 s
    assert ring_allreduce_seconds(14 * 10**9, 8, 300) == pytest.approx(2 * 7 / 8 * 14e9 / 300e9)
    assert ring_allreduce_seconds(10**9, 1, 300) == 0


def test_more_nodes_on_a_slow_network_scale_worse_than_one_node():
    card = gpu("h100")
    one_node = data_parallel_training(LLAMA, card, 64_000, 2048, 8, 1, "Ethernet 25 Gb/s")
    four_nodes = data_parallel_training(LLAMA, card, 64_000, 2048, 8, 4, "Ethernet 25 Gb/s")
    assert one_node.speedup > 7.5
    assert four_nodes.speedup < 4 * one_node.speedup * 0.5
    assert four_nodes.communication_seconds > one_node.communication_seconds


def test_speed_cli_contract():
    out = cli("speed", "llama-2-7b", "--gpu", "h100", "--batches", "1", "16", "--json")
    data = json.loads(out.stdout)
    assert data["largest_batch"]["bfloat16"] > 16
    assert [r["batch"] for r in data["rows"]] == [1, 16]
    assert {"memory_bytes", "fits", "time_to_first_token_s", "time_per_token_s", "tokens_per_second"} <= set(data["rows"][0])


def test_data_parallel_cli_contract():
    out = cli("data-parallel", "llama-3.2-1b", "--gpu", "a100-80gb", "--samples", "1000", "--gpus-per-node", "4", "--json")
    data = json.loads(out.stdout)
    assert data["gpus"] == 4 and data["speedup"] == pytest.approx(4, rel=0.01)
