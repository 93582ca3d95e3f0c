"""Counts from safetensors headers, read through the real huggingface_hub client from the
local server that plays the Hub, serving real safetensors files written here."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from safetensors.numpy import save as save_numpy

from calculator.core.errors import CalculatorError
from calculator.models.seam import header_count_reason
from calculator.models.meta import count_config
from calculator.models.safetensors import MAX_SHARDS, count_tensors, read_headers, unit_of
from tests.conftest import load_test_config
from tests.cli_runner import run_cli
from tests.test_cli import cli


def real_checkpoint(tmp_path_factory, config: dict, name: str, shard: str | None = None) -> dict[str, bytes]:
    """A model really built on the CPU and saved by transformers: its files as bytes."""
    import torch
    import transformers

    from calculator.models.meta import make_config

    torch.manual_seed(0)
    model = getattr(transformers, config["architectures"][0])._from_config(make_config(config), dtype=torch.bfloat16)
    folder = tmp_path_factory.mktemp(name)
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    return {"files": files, "parameters": sum(p.numel() for p in model.parameters())}


TINY_GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 64, "n_head": 4,
             "vocab_size": 1000, "n_positions": 128}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    llama = load_test_config("tiny-llama")
    return {
        "single": real_checkpoint(tmp_path_factory, llama, "single"),
        "sharded": real_checkpoint(tmp_path_factory, llama, "sharded", shard="100KB"),
        "tied": real_checkpoint(tmp_path_factory, TINY_GPT2, "tied"),
    }


def test_unit_of_a_tensor_is_its_numbered_block_or_its_module():
    assert unit_of("model.layers.12.mlp.up_proj.weight") == "model.layers.12"
    assert unit_of("model.embed_tokens.weight") == "model.embed_tokens"
    assert unit_of("lm_head.weight") == "lm_head"
    assert unit_of("transformer.h.0.attn.c_attn.bias") == "transformer.h.0"
    assert unit_of("logit_scale") == "logit_scale"


def test_count_tensors_by_hand():
    # Two bf16 matrices of 4 x 8 in layer 0, an F32 norm of 8, an F4 tensor of 16 values
    # stored in 8 bytes: bytes come from the byte ranges, so half-byte dtypes are exact.
    tensors = [
        ("model.layers.0.q.weight", "BF16", [4, 8], (0, 64)),
        ("model.layers.0.k.weight", "BF16", [4, 8], (64, 128)),
        ("model.norm.weight", "F32", [8], (128, 160)),
        ("model.layers.1.packed", "F4", [16], (160, 168)),
    ]
    count = count_tensors("org/x", tensors, files=1)
    assert count.elements == 32 + 32 + 8 + 16
    assert count.stored_bytes == 168
    assert [(d.dtype, d.elements, d.bytes) for d in count.dtypes] == [("BF16", 64, 128), ("F32", 8, 32), ("F4", 16, 8)]
    assert count.largest_unit().name == "model.layers.0" and count.largest_unit().parameters == 64
    assert not count.packed


@pytest.mark.parametrize("name", ["single", "sharded", "tied"])
def test_header_count_equals_the_real_model(hub, checkpoints, name):
    checkpoint = checkpoints[name]
    hub.add(f"org/{name}", checkpoint["files"])
    count = read_headers(f"org/{name}")
    # Every parameter of the model really built on the CPU, tied weights once, in bf16.
    assert count.elements == checkpoint["parameters"]
    assert count.stored_bytes == 2 * checkpoint["parameters"]
    assert [d.dtype for d in count.dtypes] == ["BF16"]
    shards = [f for f in checkpoint["files"] if f.endswith(".safetensors")]
    assert count.files == len(shards) and (len(shards) > 1) == (name == "sharded")


def test_header_count_matches_the_meta_device_count(hub, checkpoints):
    hub.add("org/single", checkpoints["single"]["files"])
    summary = count_config(load_test_config("tiny-llama"))
    count = read_headers("org/single")
    assert count.summary().parameters == summary.parameters
    assert count.summary().total_bytes_at("bfloat16") == summary.total_bytes_at("bfloat16") - summary.buffer_bytes_at("bfloat16")
    # Layers from tensor names are accelerate's units (those holding parameters), size for size.
    assert {u.name: u.parameters for u in count.units} == {u.name: u.parameters for u in summary.units if u.parameters}


def test_only_the_headers_are_downloaded(hub, checkpoints):
    files = checkpoints["single"]["files"]
    hub.add("org/single", files)
    read_headers("org/single")
    path = "/org/single/resolve/main/model.safetensors"
    size = len(files["model.safetensors"])
    assert size > 400_000  # the weights are much bigger than the client's first read
    assert 0 < hub.sent_bytes[path] <= 100_001 < size


def test_packed_quantized_weights_are_flagged_and_their_bytes_exact(hub):
    # GPTQ-style: eight 4-bit weights per int32, fp16 scales per group of 32 input features.
    tensors = {
        "model.layers.0.mlp.down_proj.qweight": np.zeros((256 // 8, 64), dtype=np.int32),
        "model.layers.0.mlp.down_proj.scales": np.zeros((256 // 32, 64), dtype=np.float16),
        "model.embed_tokens.weight": np.zeros((100, 64), dtype=np.float16),
    }
    hub.add("org/gptq", {"model.safetensors": save_numpy(tensors)})
    count = read_headers("org/gptq")
    assert count.packed
    by_dtype = {d.dtype: (d.elements, d.bytes) for d in count.dtypes}
    assert by_dtype == {"I32": (32 * 64, 32 * 64 * 4), "F16": (8 * 64 + 100 * 64, (8 * 64 + 100 * 64) * 2)}


@pytest.mark.parametrize("setup,code", [
    (lambda hub: None, "hub_not_found"),
    (lambda hub: hub.add("org/m", {"pytorch_model.bin": b"\0" * 64, "config.json": {"model_type": "gpt2"}}), "no_safetensors"),
    (lambda hub: (hub.add("org/m", {"model.safetensors": save_numpy({"w": np.zeros(4, np.float32)})}),
                  hub.gated.add("org/m")), "hub_gated"),
    (lambda hub: hub.add("org/m", {"model.safetensors": b"\xff" * 8 + b"{}"}), "safetensors_unreadable"),
    (lambda hub: hub.add("org/m", {"model.safetensors.index.json": "{not json"}), "safetensors_unreadable"),
])
def test_header_errors_are_clear(hub, setup, code):
    setup(hub)
    with pytest.raises(CalculatorError) as info:
        read_headers("org/m")
    assert info.value.code == code
    assert info.value.message("fr") != info.value.message("en")


def test_an_index_naming_too_many_shards_is_refused_before_reading_them(hub):
    weight_map = {f"layer.{i}.weight": f"model-{i:05d}.safetensors" for i in range(MAX_SHARDS + 1)}
    hub.add("org/huge", {"model.safetensors.index.json": {"weight_map": weight_map}})
    with pytest.raises(CalculatorError) as info:
        read_headers("org/huge")
    assert info.value.code == "safetensors_too_many_files"
    assert not any(r.endswith(".safetensors") and "GET" in r for r in hub.requests)


def test_bad_ids_make_no_request(hub):
    for name in ("../etc/passwd", "org/../x", "<b>x</b>/y", ""):
        with pytest.raises(CalculatorError) as info:
            read_headers(name)
        assert info.value.code == "bad_hub_id"
    assert hub.requests == []


def test_unreachable_hub_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.perf_counter()
    with pytest.raises(CalculatorError) as info:
        read_headers("org/offline")
    assert info.value.code == "hub_unreachable" and time.perf_counter() - start < 5


def test_cli_safetensors_json_and_table(hub, checkpoints):
    hub.add("org/tied", checkpoints["tied"]["files"])
    out = cli("safetensors", "org/tied", "--json", env={"HF_ENDPOINT": hub.url})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["parameters"] == checkpoints["tied"]["parameters"]
    assert data["stored_bytes"] == 2 * data["parameters"] and data["dtypes"][0]["dtype"] == "BF16"
    table = cli("safetensors", "org/tied", env={"HF_ENDPOINT": hub.url})
    assert f"{data['parameters']:,}" in table.stdout and "GiB = 2^30 bytes" in table.stdout


def test_cli_safetensors_bad_id_is_one_line():
    out = run_cli("safetensors", "not/a/hub/id")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Hub id" in out.stderr


@pytest.mark.parametrize("config,reason", [
    ({"model_type": "my_model", "auto_map": {"AutoModelForCausalLM": "modeling_my.MyModel"}, "hidden_size": 64}, "remote_code"),
    ({"model_type": "never_heard_of_it", "hidden_size": 64}, "unknown_type"),
    ({**load_test_config("tiny-llama"), "quantization_config": {"quant_method": "gptq", "bits": 4}}, "quantized"),
    (load_test_config("tiny-llama"), None),
])
def test_when_the_headers_are_needed(config, reason):
    assert header_count_reason(config) == reason


def test_absurd_configs_are_refused_before_choosing(tmp_path):
    with pytest.raises(CalculatorError) as info:
        header_count_reason({"model_type": "llama", "num_hidden_layers": 10**7})
    assert info.value.code == "config_bad_value"
