"""The offload planner equals accelerate's placement on a real model, and transformers' own
`device_map="auto"` path; the bytes add up; the slowdown and ZeRO-Offload by hand."""

from __future__ import annotations

import json

import pytest
import torch

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.distributed.offload import (build_meta_model, forward_cost, plan_device_map, snippet, tokens_to_hide_transfers,
                                zero_offload)
from tests.conftest import load_test_config
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints
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
    model = build_meta_model(catalog.config("llama-3-8b"), "bfloat16")
    plan = plan_device_map(model, [4 * 2**30, 4 * 2**30], 3 * 2**30 + 1, "bfloat16")
    code = snippet("meta-llama/Meta-Llama-3-8B", "LlamaForCausalLM", plan)
    assert plan.disk_bytes and 'max_memory={0: "4GiB", 1: "4GiB", "cpu": 3221225473}' in code
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
    bad = cli("offload", "gpt2", "--quantization", "int3")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_offload_cli_without_budgets_says_the_cpu_memory_needed():
    """No --gpu-memory: the card's default budget; no --cpu-memory: the CPU takes the rest and
    the CPU memory needed is printed. Every older key is still there."""
    from calculator.distributed.offload import default_gpu_budget

    data = json.loads(cli("offload", "llama-3.1-8b", "--gpu", "t4", "--json").stdout)
    assert data["gpu_budget"] == default_gpu_budget(gpu("t4"))
    assert {"model", "gpu", "device_map", "max_memory", "bytes_by_device", "total_bytes", "gpu_bytes", "cpu_bytes",
            "disk_bytes", "dtype", "cost", "snippet"} <= set(data)
    assert data["cpu_needed_bytes"] == data["cpu_bytes"] == 2_795_577_856 and data["disk_bytes"] == 0
    assert data["cpu_limit"] is None and data["quantization"] == "none"
    text = cli("offload", "llama-3.1-8b", "--gpu", "t4").stdout
    assert "CPU memory needed: 2.60 GiB" in text
    quantized = json.loads(cli("offload", "llama-3.1-70b", "--gpu", "rtx4090", "--quantization", "bnb-nf4",
                               "--json").stdout)
    assert quantized["quantization"] == "bnb-nf4" and quantized["cpu_bytes"] > 0
    assert "llm_int8_enable_fp32_cpu_offload=True" in quantized["snippet"]


# -- a GPU budget alone: how much CPU memory ----------------------------------------------

def _transformers_map(model, max_memory: dict) -> dict:
    from transformers.integrations.accelerate import _get_device_map

    return dict(_get_device_map(model, "auto", dict(max_memory), None))


@pytest.mark.parametrize("key,gpus", [("llama-3.1-8b", [6 * 2**30]), ("mixtral-8x7b-v0.1", [20 * 2**30, 20 * 2**30]),
                                      ("gpt2", [100 * 2**20])])
def test_without_a_cpu_budget_the_cpu_takes_the_rest(key, gpus):
    """Nothing goes to disk, the GPUs hold what they held with any large CPU budget, and the
    snippet's max_memory (with the CPU room it writes) makes transformers place exactly this."""
    model = build_meta_model(catalog.config(key), "bfloat16")
    plan = plan_device_map(model, gpus, None, "bfloat16")
    assert plan.disk_bytes == 0 and plan.cpu_bytes > 0 and plan.cpu_limit is None
    assert plan.gpu_bytes + plan.cpu_bytes == plan.total_bytes == catalog.stored_summary(key).total_bytes_at("bfloat16")
    roomy = plan_device_map(model, gpus, 2**45, "bfloat16")
    assert roomy.device_map == plan.device_map
    assert plan.requested["cpu"] % 2**30 == 0 and plan.requested["cpu"] >= plan.cpu_bytes
    assert _transformers_map(model, plan.requested) == dict(plan.device_map)
    code = snippet(catalog.find(key).id, type(model).__name__, plan)
    assert f'"cpu": "{plan.requested["cpu"] // 2**30}GiB"' in code and "offload_folder" not in code


def test_cpu_needed_for_llama_3_1_8b_on_a_t4_by_hand():
    """The T4's default budget: what a process gets (14,909 MiB less its context, the Turing median
    of published out-of-memory messages: tsugumi-sys/SA-ConvLSTM-Pytorch#22, 13.94 GiB in use −
    13.20 GiB allocated − 621.20 MiB unallocated) less the 5% headroom, in whole MiB; the CPU
    holds every decoder layer that does not fit: 4 of them (6 with the former 1,474 MB context)."""
    from calculator.distributed.offload import default_gpu_budget

    card = gpu("t4")
    usable = 14909 * 2**20 - (round(13.94 * 2**30) - round(13.20 * 2**30) - round(621.20 * 2**20))
    assert default_gpu_budget(card) == (usable - -(-usable * 5 // 100)) // 2**20 * 2**20
    model = build_meta_model(catalog.config("llama-3.1-8b"), "bfloat16")
    plan = plan_device_map(model, [default_gpu_budget(card)], None, "bfloat16")
    layer = 218_112_000 * 2  # one decoder layer in bfloat16
    on_cpu = [k for k, v in plan.device_map.items() if v == "cpu"]
    layers_on_cpu = sum(1 for k in on_cpu if k.startswith("model.layers."))
    head = 525_336_576 * 2
    rotary = 2 * 64 * 4  # inv_freq and original_inv_freq, 64 float32 each
    assert layers_on_cpu == 4 and {"lm_head", "model.norm", "model.rotary_emb"} <= set(on_cpu)
    assert plan.cpu_bytes == layers_on_cpu * layer + head + 4096 * 2 + rotary == 2_795_577_856
    assert plan.gpu_bytes <= default_gpu_budget(card)


# -- bitsandbytes with offloading, as transformers does it ---------------------------------

BNB_CONFIGS = {"bnb-nf4": dict(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
               "bnb-fp4": dict(load_in_4bit=True, bnb_4bit_quant_type="fp4"), "bnb-int8": dict(load_in_8bit=True)}


def _bnb_model(config: dict, quantization: str, device_map, flag: bool = True):
    """transformers' own quantizer on the meta model, as from_pretrained runs it
    (modeling_utils.py: preprocess_model under the load dtype, before _get_device_map)."""
    pytest.importorskip("bitsandbytes")
    from transformers import BitsAndBytesConfig
    from transformers.modeling_utils import local_torch_dtype
    from transformers.quantizers.auto import AutoHfQuantizer

    quantizer = AutoHfQuantizer.from_config(
        BitsAndBytesConfig(**BNB_CONFIGS[quantization], llm_int8_enable_fp32_cpu_offload=flag), pre_quantized=False)
    model = build_meta_model(config, "bfloat16")
    with local_torch_dtype(torch.bfloat16, "test"), torch.device("meta"):
        quantizer.preprocess_model(model=model, dtype=torch.bfloat16, device_map=device_map, checkpoint_files=None,
                                   use_kernels=False)
    return model, quantizer


@pytest.mark.parametrize("quantization", ["bnb-nf4", "bnb-int8"])
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-mixtral", "tiny-gemma2"])
@pytest.mark.parametrize("gpus", [[150_000], [325_000], [350_000], [400_000], [200_000, 200_000], [10**9]])
def test_quantized_plan_is_transformers_own_placement(name, quantization, gpus):
    """The map equals what `_get_device_map(model, "auto", ...)` computes with transformers'
    real bitsandbytes quantizer, after its replacement of the linear layers."""
    from transformers.integrations.accelerate import _get_device_map

    config = load_test_config(name)
    model, quantizer = _bnb_model(config, quantization, "auto")
    memory = {i: b for i, b in enumerate(gpus)} | {"cpu": 2**50}
    expected = _get_device_map(model, "auto", memory, quantizer)
    plan = plan_device_map(build_meta_model(config, "bfloat16"), gpus, None, "bfloat16", quantization)
    assert list(plan.device_map.items()) == list(expected.items())


@pytest.mark.parametrize("quantization", ["bnb-nf4", "bnb-int8"])
def test_quantized_layers_on_the_gpu_the_rest_unquantized(quantization):
    """Given the plan's map as a dict with llm_int8_enable_fp32_cpu_offload, transformers
    replaces the linear layers placed on the GPU only; the bytes on each side, by hand from
    the converted model: quantized weights at bitsandbytes' size, the rest in bfloat16."""
    import bitsandbytes as bnb

    from calculator.distributed.offload_bnb import device_of
    from calculator.memory.quantization import bnb_int8_bytes, bnb_nf4_bytes

    config = load_test_config("tiny-llama")
    plan = plan_device_map(build_meta_model(config, "bfloat16"), [350_000], None, "bfloat16", quantization)
    assert plan.cpu_bytes and plan.gpu_bytes
    model, quantizer = _bnb_model(config, quantization, dict(plan.device_map))
    quantizer.validate_environment(device_map=dict(plan.device_map))  # accepted with the flag
    layer = bnb.nn.Linear8bitLt if quantization == "bnb-int8" else bnb.nn.Linear4bit
    gpu_side = cpu_side = 0
    for module_name, module in model.named_modules():
        for tensor_name, tensor in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            full = f"{module_name}.{tensor_name}" if module_name else tensor_name
            on_gpu = device_of(full, plan.device_map) not in ("cpu", "disk")
            assert not (isinstance(module, layer) and not on_gpu), full  # nothing offloaded is quantized
            if isinstance(module, layer) and tensor_name == "weight":
                out_f, in_f = module.out_features, module.in_features
                size = bnb_int8_bytes(in_f, out_f) if quantization == "bnb-int8" else bnb_nf4_bytes(in_f * out_f, False)
            else:
                assert tensor.dtype in (torch.bfloat16, torch.float32), full
                size = tensor.numel() * tensor.element_size()
            if on_gpu:
                gpu_side += size
            else:
                cpu_side += size
    assert (plan.gpu_bytes, plan.cpu_bytes) == (gpu_side, cpu_side)
    converted = sum(isinstance(m, layer) for m in model.modules())
    assert 0 < converted < sum(1 for m in build_meta_model(config, "bfloat16").modules()
                               if type(m) is torch.nn.Linear)
    strict, strict_quantizer = _bnb_model(config, quantization, dict(plan.device_map), flag=False)
    with pytest.raises(ValueError, match="llm_int8_enable_fp32_cpu_offload"):
        strict_quantizer.validate_environment(device_map=dict(plan.device_map))


@pytest.mark.parametrize("quantization", ["bnb-nf4", "bnb-fp4", "bnb-int8"])
def test_quantized_snippet_loads_with_the_explicit_map(quantization):
    model = build_meta_model(catalog.config("llama-3.1-70b"), "bfloat16")
    plan = plan_device_map(model, [20 * 2**30], 24 * 2**30, "bfloat16", quantization)
    assert plan.gpu_bytes and plan.cpu_bytes and plan.disk_bytes
    code = snippet("meta-llama/Llama-3.1-70B", "LlamaForCausalLM", plan, "fr")
    assert "llm_int8_enable_fp32_cpu_offload=True" in code and "device_map=device_map" in code
    assert "offload_folder" in code and "torch_dtype" not in code and "dtype=torch.bfloat16" in code
    assert ("load_in_8bit=True" in code) == (quantization == "bnb-int8")
    assert (f'bnb_4bit_quant_type="{quantization[4:]}"' in code) == (quantization != "bnb-int8")
    assert "non quantifi" in code  # comments in the reader's language
    start = code.index("device_map = {")
    namespace: dict = {}
    exec(code[start:code.index("\n}\n", start) + 2], namespace)
    assert namespace["device_map"] == dict(plan.device_map)
    compile(code, "snippet", "exec")


def test_quantized_cpu_limit_sends_the_rest_to_disk():
    """With a CPU limit the offloaded (unquantized) modules fill the CPU in model order, keeping
    room for the largest of them, and the rest goes to disk; the GPU side is unchanged."""
    model = build_meta_model(catalog.config("llama-3.1-8b"), "bfloat16")
    free = plan_device_map(model, [4 * 2**30], None, "bfloat16", "bnb-nf4")
    limited = plan_device_map(model, [4 * 2**30], 3 * 2**30, "bfloat16", "bnb-nf4")
    assert limited.gpu_bytes == free.gpu_bytes and free.disk_bytes == 0
    assert limited.cpu_bytes + limited.disk_bytes == free.cpu_bytes
    head = 525_336_576 * 2  # lm_head in bfloat16, the largest offloaded entry
    assert limited.largest_offloaded_bytes == head
    assert limited.cpu_bytes == (3 * 2**30 - head) // (218_112_000 * 2) * 218_112_000 * 2


@pytest.mark.parametrize("quantization", ["bnb-nf4", "bnb-int8"])
@pytest.mark.parametrize("key", ["llama-3.1-8b", "mixtral-8x7b-v0.1", "gpt2", "qwen2.5-0.5b", "gemma-2-9b"])
def test_quantized_all_on_gpu_is_the_whole_quantized_model(key, quantization):
    """On a GPU large enough, the plan's bytes are calculator.memory.quantization's count of the same
    format (pinned there against real bitsandbytes layers): the same modules are converted."""
    from calculator.models.seam import catalog_model
    from calculator.memory.quantization import quantize_model

    model = build_meta_model(catalog.config(key), "bfloat16")
    plan = plan_device_map(model, [2**40], None, "bfloat16", quantization)
    assert not plan.offloaded and plan.gpu_bytes == plan.all_on_gpu_bytes
    entry = catalog_model(key)
    assert plan.gpu_bytes == quantize_model(entry.summary, entry.spec, quantization).total_bytes


def test_offload_starts_from_the_cards_precision_as_inference_does():
    """No --dtype: float16 on a card without bfloat16 tensor cores (a T4, Colab's and Kaggle's),
    said in the table and in the JSON's assumptions, as `inference` and `speed` choose; bfloat16
    where the card has them; an asked dtype is kept."""
    t4 = json.loads(cli("offload", "llama-3.1-8b", "--gpu", "t4", "--json").stdout)
    assert t4["dtype"] == "float16" and "dtype=torch.float16" in t4["snippet"]
    assert t4["assumptions"] == [{"id": "compute_dtype", "value": {"dtype": "float16", "reason": "no_bf16_tensor_cores",
                                                                    "gpu": "t4"}}]
    assert t4["dtype"] == json.loads(cli("inference", "llama-3.1-8b", "--gpu", "t4", "--batch", "1", "--context", "512",
                                         "--json").stdout)["dtype"]
    assert "Precision: float16, the NVIDIA T4 has no bfloat16 tensor cores" in cli("offload", "llama-3.1-8b", "--gpu",
                                                                                   "Kaggle 2xT4").stdout
    asked = json.loads(cli("offload", "llama-3.1-8b", "--gpu", "t4", "--dtype", "bfloat16", "--json").stdout)
    assert asked["dtype"] == "bfloat16" and asked["assumptions"] == []
    assert json.loads(cli("offload", "llama-3.1-8b", "--gpu", "rtx4090", "--json").stdout)["dtype"] == "bfloat16"
