"""The offload planner equals accelerate's placement on a real model, and transformers' own
`device_map="auto"` path; the bytes add up; the slowdown and ZeRO-Offload by hand."""

from __future__ import annotations

import json

import pytest
import torch

from calculator import catalog
from calculator.errors import CalculatorError
from calculator.gpus import gpu
from calculator.offload import (build_meta_model, forward_cost, plan_device_map, snippet, tokens_to_hide_transfers,
                                zero_offload)
from tests.conftest import load_test_config
from tests.test_cli import cli
from tests.test_real_models import build_real

MIB = 2**20
BUDGETS = [  # (GPU budgets, CPU budget) in bytes, for the tiny models (about 0.5 MiB)
    ([200_000], 150_000), ([100_000, 100_000], 100_000), ([60_000], 10_000), ([0], 10**9), ([10**9], 0),
]


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-mixtral", "tiny-gemma2"])
@pytest.mark.parametrize("gpus,cpu", BUDGETS)
def test_plan_equals_accelerate_on_a_real_model(name, gpus, cpu):
    """accelerate's infer_auto_device_map on the same model really built on the CPU, with the
    budgets balanced by accelerate's get_balanced_memory when there are several GPUs."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    config = load_test_config(name)
    real = build_real(config, "auto", torch.bfloat16)
    memory = {i: b for i, b in enumerate(gpus)} | {"cpu": cpu}
    no_split = real._no_split_modules
    if len([b for b in gpus if b > 0]) > 1:
        memory = get_balanced_memory(real, max_memory=dict(memory), no_split_module_classes=no_split)
    expected = infer_auto_device_map(real, max_memory=dict(memory), no_split_module_classes=no_split)
    plan = plan_device_map(build_meta_model(config, "bfloat16"), gpus, cpu, "bfloat16")
    assert dict(plan.device_map) == dict(expected)
    assert list(plan.device_map) == list(expected)


@pytest.mark.parametrize("gpus,cpu", [([4 * 2**30], 2 * 2**30), ([3 * 2**30, 3 * 2**30], 8 * 2**30)])
def test_plan_is_what_from_pretrained_auto_computes(gpus, cpu):
    """transformers' own device_map="auto" path (the snippet's) gives the same map."""
    from transformers.integrations.accelerate import _get_device_map

    model = build_meta_model(catalog.config("llama-3-8b"), "bfloat16")
    memory = {i: b for i, b in enumerate(gpus)} | {"cpu": cpu}
    assert dict(_get_device_map(model, "auto", dict(memory), None)) == dict(
        plan_device_map(model, gpus, cpu, "bfloat16").device_map)


@pytest.mark.parametrize("key", ["llama-3-8b", "gpt2", "mixtral-8x7b-v0.1", "t5-small"])
def test_placed_bytes_add_up_to_the_model(key):
    plan = plan_device_map(build_meta_model(catalog.config(key), "bfloat16"), [2 * 2**30], 2**30, "bfloat16")
    assert sum(plan.bytes_by_device.values()) == plan.total_bytes
    assert plan.total_bytes == catalog.stored_summary(key).total_bytes_at("bfloat16")


def test_float32_plans_count_four_bytes():
    plan = plan_device_map(build_meta_model(catalog.config("gpt2"), "float32"), [10**12], 0, "float32")
    assert plan.total_bytes == catalog.stored_summary("gpt2").total_bytes_at("float32")
    assert set(plan.bytes_by_device) == {"0"}


def test_slowdown_by_hand():
    plan = plan_device_map(build_meta_model(catalog.config("llama-3-8b"), "bfloat16"), [10 * 2**30], 4 * 2**30,
                           "bfloat16")
    card = gpu("rtx4090")  # 1008 GB/s, PCIe 4.0 x16: 32 GB/s per direction, NVMe 7 GB/s
    cost = forward_cost(plan, card)
    assert plan.gpu_bytes and plan.cpu_bytes and plan.disk_bytes
    seconds = plan.gpu_bytes / 1008e9 + plan.cpu_bytes / 32e9 + plan.disk_bytes / 7e9 + plan.disk_bytes / 32e9
    assert cost.seconds == pytest.approx(seconds)
    assert cost.slowdown == pytest.approx(seconds / (plan.total_bytes / 1008e9))


def test_snippet_reproduces_the_budgets():
    code = snippet("meta-llama/Meta-Llama-3-8B", "LlamaForCausalLM", [10 * 2**30, 10 * 2**30], 3 * 2**30 + 1,
                   "bfloat16", needs_disk=True)
    assert 'max_memory={0: "10GiB", 1: "10GiB", "cpu": 3221225473}' in code
    assert 'device_map="auto"' in code and "offload_folder" in code and "dtype=torch.bfloat16" in code
    compile(code, "snippet", "exec")


def test_bad_plans_are_refused():
    model = build_meta_model(catalog.config("gpt2"), "bfloat16")
    with pytest.raises(CalculatorError):
        plan_device_map(model, [], 10, "bfloat16")
    with pytest.raises(CalculatorError):
        plan_device_map(model, [-1], 10, "bfloat16")
    with pytest.raises(CalculatorError):
        build_meta_model(catalog.config("gpt2"), "int4")


def test_zero_offload_by_hand():
    card = gpu("a100-80gb")  # 312 TFLOP/s in bf16, PCIe 4.0
    z = zero_offload(13 * 10**9, card, 32768)
    assert (z.gpu_plain_bytes, z.gpu_offload_bytes, z.cpu_offload_bytes) == (208e9, 26e9, 182e9)
    assert z.transfer_seconds == pytest.approx(4 * 13e9 / 32e9)
    assert z.compute_seconds == pytest.approx(6 * 13e9 * 32768 / (312e12 * 0.4))
    threshold = tokens_to_hide_transfers(13 * 10**9, card)
    assert zero_offload(13 * 10**9, card, threshold).hidden and not zero_offload(13 * 10**9, card, threshold - 1).hidden


def test_offload_cli():
    out = cli("offload", "llama-3-8b", "--gpu-memory", "10GiB", "--cpu-memory", "4GiB", "--json")
    data = json.loads(out.stdout)
    assert sum(data["bytes_by_device"].values()) == data["total_bytes"]
    assert data["cost"]["slowdown"] > 1 and "max_memory=" in data["snippet"]
    assert "Device 0 is not available" not in out.stderr
    bad = cli("offload", "gpt2", "--gpu-memory", "lots", "--cpu-memory", "1GiB")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
