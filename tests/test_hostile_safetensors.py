"""Hostile safetensors headers, served by the local Hub: every amount is bounded before it is
fetched (shards, tensors, header bytes, layers), every tensor is checked (no negative or
absurd shape or byte range), and counts are whole numbers."""

from __future__ import annotations

import json
import resource
import time

import pytest

from calculator.models import safetensors
from calculator.core.errors import CalculatorError
from calculator.models.safetensors import count_tensors, read_headers, read_headers_here


def header_file(tensors: dict, declared: int | None = None) -> bytes:
    """A safetensors file's header part (the weights are never read, so they are left out)."""
    raw = json.dumps(tensors).encode()
    return (declared if declared is not None else len(raw)).to_bytes(8, "little") + raw


def tensor(shape, dtype="BF16", begin=0, bits=16):
    numel = 1
    for dim in shape:
        numel *= dim
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + numel * bits // 8]}


def code(call) -> str:
    with pytest.raises(CalculatorError) as info:
        call()
    assert info.value.message("fr") != info.value.message("en")
    return info.value.code


@pytest.mark.parametrize("entry", [
    {"dtype": "BF16", "shape": [-4, 8], "data_offsets": [0, 64]},  # a negative dimension
    {"dtype": "BF16", "shape": [4, 8], "data_offsets": [64, 0]},  # a negative byte range
    {"dtype": "BF16", "shape": [4, 8], "data_offsets": [-64, 0]},
    {"dtype": "BF16", "shape": [10**12, 10**12], "data_offsets": [0, 2 * 10**24]},  # 10^24 elements
    {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 4]},  # bytes that cannot hold the shape
    {"dtype": "BF16", "shape": [2.5, 8], "data_offsets": [0, 40]},  # not whole numbers
    {"dtype": "BF16", "shape": ["4", 8], "data_offsets": [0, 64]},
    {"dtype": "BF16", "shape": [True, 8], "data_offsets": [0, 16]},
    {"dtype": "<script>", "shape": [4], "data_offsets": [0, 8]},
    {"dtype": "BF16", "shape": [4], "data_offsets": [0, 2**60]},
    {"dtype": "BF16", "shape": [4]},
    "not a tensor",
])
def test_impossible_tensors_are_refused(hub, entry):
    hub.add("org/bad", {"model.safetensors": header_file({"model.layers.0.w": entry})})
    assert code(lambda: read_headers("org/bad")) in ("safetensors_bad_tensor", "safetensors_unreadable")


def test_counts_are_whole_numbers_from_checked_entries():
    count = count_tensors("org/x", [("a.0.w", "BF16", [4, 8], (0, 64)), ("a.1.w", "F4", [16], (64, 72))], files=1)
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in (count.elements, count.stored_bytes, count.tensors))
    with pytest.raises(CalculatorError):
        count_tensors("org/x", [("w", "F32", [1e3], (0, 4000))], files=1)


def test_a_header_longer_than_the_bound_is_not_fetched(hub):
    declared = safetensors.MAX_HEADER_BYTES + 1
    body = header_file({"w": tensor([4])}, declared=declared) + b" " * 300_000
    hub.add("org/long", {"model.safetensors": body})
    assert code(lambda: read_headers("org/long")) == "safetensors_headers_too_large"
    assert hub.sent_bytes["/org/long/resolve/main/model.safetensors"] <= safetensors.FIRST_READ_BYTES


# Tests that lower a bound read in this process (read_headers_here, what the build worker runs).
def test_an_index_listing_too_many_tensors_is_refused_before_any_shard(hub, monkeypatch):
    monkeypatch.setattr(safetensors, "MAX_TENSORS", 1000)
    weight_map = {f"model.layers.{i}.w": f"model-{i % 3:05d}-of-00003.safetensors" for i in range(1001)}
    hub.add("org/many", {"model.safetensors.index.json": {"weight_map": weight_map}})
    assert code(lambda: read_headers_here("org/many")) == "safetensors_too_many_tensors"
    assert not any(r.endswith(".safetensors") and r.startswith("GET") for r in hub.requests)


def test_headers_listing_more_tensors_than_their_index_are_refused(hub, monkeypatch):
    monkeypatch.setattr(safetensors, "MAX_TENSORS", 1000)
    tensors = {f"model.layers.0.w{i}": tensor([2], begin=4 * i) for i in range(1001)}
    hub.add("org/lying", {"model.safetensors": header_file(tensors)})
    assert code(lambda: read_headers_here("org/lying")) == "safetensors_too_many_tensors"


def test_names_making_more_layers_than_any_checkpoint_are_refused(hub, monkeypatch):
    monkeypatch.setattr(safetensors, "MAX_UNITS", 100)
    tensors = {f"block{i}.w": tensor([2], begin=4 * i) for i in range(101)}  # each its own layer
    hub.add("org/flat", {"model.safetensors": header_file(tensors)})
    assert code(lambda: read_headers_here("org/flat")) == "safetensors_too_many_layers"


def test_all_headers_together_are_bounded(hub, monkeypatch):
    monkeypatch.setattr(safetensors, "MAX_TOTAL_HEADER_BYTES", 150_000)
    shards = {}
    weight_map = {}
    for s in range(4):
        name = f"model-{s:05d}-of-00004.safetensors"
        tensors = {f"model.layers.{s}.w{i}": tensor([2], begin=4 * i) for i in range(800)}  # ~60 KB each
        shards[name] = header_file(tensors)
        weight_map.update(dict.fromkeys(tensors, name))
    hub.add("org/wide", {**shards, "model.safetensors.index.json": {"weight_map": weight_map}})
    assert code(lambda: read_headers_here("org/wide")) == "safetensors_headers_too_large"


def test_the_largest_headers_allowed_are_read_quickly_and_in_little_memory(hub):
    """The probe's 16-shard case at the bounds: 240,000 tensors in 16 headers (about 20 MB)."""
    shards, weight_map = {}, {}
    per_shard = 15_000
    for s in range(16):
        name = f"model-{s:05d}-of-00016.safetensors"
        tensors = {f"model.layers.{s}.mlp.experts.{i}.w": tensor([64, 64], begin=8192 * i) for i in range(per_shard)}
        shards[name] = header_file(tensors)
        weight_map.update(dict.fromkeys(tensors, name))
    hub.add("org/big", {**shards, "model.safetensors.index.json": {"weight_map": weight_map}})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    count = read_headers("org/big")
    elapsed = time.perf_counter() - start
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert count.tensors == 16 * per_shard and count.elements == 16 * per_shard * 64 * 64
    assert len(count.units) == 16  # one layer per shard: the result stays small, whatever the tensors
    assert elapsed < 20, elapsed
    assert grown_mib < 400, grown_mib


def test_the_cli_answers_a_bad_header_on_one_line(hub):
    from tests.test_cli import cli

    hub.add("org/neg", {"model.safetensors": header_file({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})})
    out = cli("safetensors", "org/neg", env={"HF_ENDPOINT": hub.url})
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
