"""`python -m calculator train`: per-GPU keys in bytes, a table with units, one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CONFIGS
from tests.test_cli import cli

PER_GPU = {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes"}


def test_train_json_has_the_per_gpu_keys_in_bytes():
    out = cli("train", "llama-3-8b", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert PER_GPU | {"master_weights_bytes", "peak_phase", "at_peak", "cpu_bytes", "trainable_parameters"} <= set(data)
    assert all(isinstance(data[key], int) for key in PER_GPU)
    assert sum(data["at_peak"].values()) == data["total_bytes"]
    # mixed precision: 16-bit weights and a float32 master copy, 16-bit gradients, two float32 Adam states
    assert data["master_weights_bytes"] == 4 * 8_030_261_248
    assert data["gradients_bytes"] == 2 * 8_030_261_248
    assert data["optimizer_bytes"] == 8 * 8_030_261_248
    assert data["rule_of_thumb_bytes"] == 8 * 8_030_261_248


def test_train_with_a_gpu_answers_the_inverse_questions():
    data = json.loads(cli("train", "llama-3.2-1b", "--method", "lora", "--gpu", "rtx4090", "--json").stdout)
    assert data["fits"] is True and data["largest_micro_batch"] >= 1
    counts = {row["strategy"]: row["gpus"] for row in data["fewest_gpus"]}
    assert counts["ddp"] == 1 and counts["zero3"] == 1


def test_train_distributed_layout_and_local_config():
    data = json.loads(cli("train", "llama-2-13b", "--gpus", "16", "--tensor", "2", "--pipeline", "2", "--zero", "1",
                          "--json").stdout)
    assert (data["data_parallel"], data["tensor_parallel"], data["pipeline_parallel"]) == (4, 2, 2)
    local = json.loads(cli("train", str(CONFIGS / "tiny-llama.json"), "--method", "lora", "--lora-targets",
                           "q_proj,v_proj", "--lora-rank", "4", "--json").stdout)
    assert local["source"] == "local"
    assert local["trainable_parameters"] == 3 * 4 * ((64 + 64) + (64 + 32))  # 3 layers, rank 4


def test_train_table_names_its_units():
    out = cli("train", "gpt2", "--batch", "8", "--sequence", "1024", "--units", "GB")
    assert out.returncode == 0, out.stderr
    assert " GB" in out.stdout and "10^9 bytes" in out.stdout and "peak per GPU" in out.stdout


@pytest.mark.parametrize("args", [
    ("train", "llama-3-8b", "--gpus", "6", "--tensor", "4"),
    ("train", "llama-3-8b", "--method", "lora", "--lora-targets", "not_a_layer"),
    ("train", "llama-3-8b", "--zero", "5"),
    ("train", "llama-3-8b", "--method", "dora"),
    ("train", "llama-3-8b", "--batch", "0"),
    ("train", "llama-3-8b", "--offload-optimizer"),
    ("train", "llama-3-8b", "--gpu", "no-such-gpu"),
    ("train", "llama-3-8b", "--tensor", "3", "--gpus", "3"),
])
def test_train_bad_input_is_one_line_and_exit_code_2(args):
    out = cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
