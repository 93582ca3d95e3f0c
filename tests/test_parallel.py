"""Pipeline split, bubble and schedule, tensor parallelism: sums, formulas and hand counts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.distributed.parallel import (bubble_fraction, communication_seconds, peak_in_flight, pipeline_schedule,
                                 pipeline_split, schedule_idle_fraction, tensor_parallel, tied_head_copy_bytes)
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

KEYS = [e.key for e in catalog.entries()]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int4"])
def test_stages_add_up_to_the_model(key, dtype):
    summary = catalog.stored_summary(key)
    for gpus in (1, 2, 3, 4, 8):
        if gpus > len(summary.units):
            continue
        stages = pipeline_split(summary, dtype, gpus)
        assert len(stages) == gpus and all(s.units for s in stages)
        assert sum(s.bytes for s in stages) == summary.total_bytes_at(dtype)
        assert sum(s.units for s in stages) == len(summary.units)
        assert all(sum(s.kinds.values()) == s.bytes for s in stages)


def test_llama_split_by_hand():
    """Llama-3-8B in bfloat16: embeddings and head of 128256 x 4096, 32 layers of 218,112,000
    parameters; three GPUs: embeddings + 10 layers, 12 layers, 10 layers + norm + head."""
    summary = catalog.stored_summary("llama-3-8b")
    stages = pipeline_split(summary, "bfloat16", 3)
    embed, layer, norm = 128256 * 4096 * 2, 218_112_000 * 2, 4096 * 2
    assert [s.first for s in stages] == ["model.embed_tokens", "model.layers.10", "model.layers.22"]
    assert stages[0].bytes == embed + 10 * layer
    assert stages[1].bytes == 12 * layer
    rotary = 2 * 64 * 4  # inv_freq and original_inv_freq, 64 float32 each
    assert stages[2].bytes == 10 * layer + norm + rotary + embed
    assert stages[0].kinds == {"embedding": embed, "layers": 10 * layer}


def test_split_minimises_the_fullest_gpu():
    summary = catalog.stored_summary("llama-2-7b")
    sizes = [u.bytes_at("bfloat16") for u in summary.units]
    best = max(s.bytes for s in pipeline_split(summary, "bfloat16", 4))
    # every other cut of these units into 4 contiguous parts has a part at least this large
    n = len(sizes)
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    brute = min(max(prefix[a], prefix[b] - prefix[a], prefix[c] - prefix[b], prefix[n] - prefix[c])
                for a in range(1, n) for b in range(a + 1, n) for c in range(b + 1, n))
    assert best == brute


def test_tied_head_copy():
    assert tied_head_copy_bytes(catalog.stored_summary("gpt2"), catalog.stored_spec("gpt2"), "float32") == 50257 * 768 * 4
    assert tied_head_copy_bytes(catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b"), "bfloat16") == 0


@pytest.mark.parametrize("p,m,expected", [(2, 1, 1 / 2), (4, 4, 3 / 7), (4, 32, 3 / 35), (8, 8, 7 / 15), (1, 5, 0.0)])
def test_bubble_formula_at_several_points(p, m, expected):
    assert bubble_fraction(p, m) == pytest.approx(expected)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 10), m=st.integers(1, 24), schedule=st.sampled_from(["GPipe", "1F1B"]))
def test_the_drawn_schedule_idles_as_the_formula_says(p, m, schedule):
    slots = pipeline_schedule(p, m, schedule)
    assert len(slots) == 2 * p * m
    assert schedule_idle_fraction(slots, p) == pytest.approx(bubble_fraction(p, m))
    for stage in range(p):  # a stage never runs two things at once
        mine = sorted((s.start, s.end) for s in slots if s.stage == stage)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(mine, mine[1:]))


def test_1f1b_holds_fewer_micro_batches():
    assert peak_in_flight(pipeline_schedule(4, 16, "GPipe"), 0) == 16
    assert peak_in_flight(pipeline_schedule(4, 16, "1F1B"), 0) == 4


def test_tensor_parallel_llama_by_hand():
    """Llama-2-7B, t = 4: every matrix and the vocabulary split in 4; norms and buffers whole."""
    summary, spec = catalog.stored_summary("llama-2-7b"), catalog.stored_spec("llama-2-7b")
    result = tensor_parallel(summary, spec, "bfloat16", 4, tokens=1000)
    split = (summary.groups["linear"] + summary.groups["head"] + summary.groups["embedding"]) * 2 // 4
    whole = summary.groups["norm"] * 2 + 512
    assert result.split_bytes_per_gpu == split
    assert result.replicated_bytes == whole
    assert result.per_gpu_bytes == split + whole
    assert result.allreduces_per_forward == 2 * 32 + 1
    assert result.allreduce_bytes == 1000 * 4096 * 2
    assert tensor_parallel(summary, spec, "bfloat16", 1).per_gpu_bytes == summary.total_bytes_at("bfloat16")


def test_key_value_heads_are_replicated_beyond_their_count():
    summary, spec = catalog.stored_summary("llama-3.1-70b"), catalog.stored_spec("llama-3.1-70b")  # 8 KV heads
    k8 = {m.name: m.bytes_per_gpu for m in tensor_parallel(summary, spec, "bfloat16", 8).matrices}
    k16 = {m.name: m.bytes_per_gpu for m in tensor_parallel(summary, spec, "bfloat16", 16).matrices}
    assert k16["k_proj"] == k8["k_proj"] == 80 * 8192 * 128 * 2  # one 128-wide head per GPU
    assert k16["q_proj"] * 2 == k8["q_proj"]


def test_routers_are_replicated():
    summary, spec = catalog.stored_summary("mixtral-8x7b-v0.1"), catalog.stored_spec("mixtral-8x7b-v0.1")
    result = tensor_parallel(summary, spec, "bfloat16", 8)
    gate = next(m for m in result.matrices if m.out_features == 8)
    assert gate.split == "replicated" and gate.bytes_per_gpu == 32 * 4096 * 8 * 2


def test_degree_must_divide_the_heads():
    with pytest.raises(CalculatorError):
        tensor_parallel(catalog.stored_summary("falcon-7b"), catalog.stored_spec("falcon-7b"), "bfloat16", 2)


def test_allreduce_time_by_hand():
    summary, spec = catalog.stored_summary("llama-2-7b"), catalog.stored_spec("llama-2-7b")
    result = tensor_parallel(summary, spec, "bfloat16", 8, tokens=2048)
    one = 2 * 7 / 8 * 2048 * 4096 * 2 / 450e9
    assert communication_seconds(result, 450) == pytest.approx(65 * one)


def test_pipeline_and_tensor_parallel_cli():
    data = json.loads(cli("pipeline", "llama-3-8b", "--gpus", "3", "--micro-batches", "8", "--json").stdout)
    assert sum(s["bytes"] for s in data["stages"]) == data["total_bytes"]
    assert data["bubble_fraction"] == pytest.approx(2 / 10)
    data = json.loads(cli("tensor-parallel", "llama-2-7b", "--degree", "4", "--json").stdout)
    assert {"per_gpu_bytes", "replicated_bytes", "matrices", "communication_seconds"} <= set(data)
    bad = cli("tensor-parallel", "falcon-7b", "--degree", "2")
    assert bad.returncode == 2 and "71" in bad.stderr and "Traceback" not in bad.stderr
