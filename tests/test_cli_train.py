"""`python -m calculator train`: per-GPU keys in bytes, a table with units, one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CONFIGS
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

# The command's defaults before they became the fine-tuning chapter's: the tests below were
# worked out for this step.
FULL_MIXED = ("--method", "full", "--precision", "mixed", "--batch", "1")
PER_GPU = {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes"}


def test_train_json_has_the_per_gpu_keys_in_bytes():
    out = cli("train", "llama-3-8b", *FULL_MIXED, "--json")
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
    data = json.loads(cli("train", "llama-3.2-1b", "--method", "lora", "--precision", "mixed", "--batch", "1",
                          "--gpu", "rtx4090", "--json").stdout)
    assert data["fits"] is True and data["largest_micro_batch"] >= 1
    counts = {row["strategy"]: row["gpus"] for row in data["fewest_gpus"]}
    assert counts["ddp"] == 1 and counts["zero3"] == 1


def test_train_distributed_layout_and_local_config():
    data = json.loads(cli("train", "llama-2-13b", *FULL_MIXED, "--gpus", "16", "--tensor", "2", "--pipeline", "2",
                          "--zero", "1", "--json").stdout)
    assert (data["data_parallel"], data["tensor_parallel"], data["pipeline_parallel"]) == (4, 2, 2)
    local = json.loads(cli("train", str(CONFIGS / "tiny-llama.json"), "--method", "lora", "--lora-targets",
                           "q_proj,v_proj", "--lora-rank", "4", "--precision", "mixed", "--batch", "1", "--json").stdout)
    assert local["source"] == "local"
    assert local["trainable_parameters"] == 3 * 4 * ((64 + 64) + (64 + 32))  # 3 layers, rank 4


def test_train_table_names_its_units():
    out = cli("train", "gpt2", "--method", "full", "--precision", "mixed", "--batch", "8", "--sequence", "1024",
              "--units", "GB")
    assert out.returncode == 0, out.stderr
    assert " GB" in out.stdout and "10^9 bytes" in out.stdout and "peak per GPU" in out.stdout


@pytest.mark.parametrize("args", [
    ("train", "llama-3-8b", *FULL_MIXED, "--gpus", "6", "--tensor", "4"),
    ("train", "llama-3-8b", "--method", "lora", "--lora-targets", "not_a_layer"),
    ("train", "llama-3-8b", *FULL_MIXED, "--zero", "5"),
    ("train", "llama-3-8b", "--method", "dora"),
    ("train", "llama-3-8b", "--batch", "0"),
    ("train", "llama-3-8b", *FULL_MIXED, "--offload-optimizer"),
    ("train", "llama-3-8b", *FULL_MIXED, "--gpu", "no-such-gpu"),
    ("train", "llama-3-8b", *FULL_MIXED, "--tensor", "3", "--gpus", "3"),
    ("train", "llama-3-8b", "--loss", "liger"),
])
def test_train_bad_input_is_one_line_and_exit_code_2(args):
    out = cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")


def test_train_json_prints_the_figures_the_widgets_show():
    """Llama-3-8B, micro-batch 1 x 2,048 tokens: the peak by component (master copy apart), the
    rule of thumb by component, one layer's tensors by group, the loss's float32
    log-probabilities (4 x 2,048 x 128,256) and Korthikanti's 34sbh + 5as^2b."""
    data = json.loads(cli("train", "llama-3-8b", *FULL_MIXED, "--json").stdout)
    assert list(data["peak_components"]) == ["weights", "master", "gradients", "optimizer", "activations", "buffers",
                                             "temporary"]
    assert sum(data["peak_components"].values()) == data["total_bytes"]
    assert data["peak_components"]["master"] == data["master_weights_bytes"] == 4 * 8_030_261_248
    assert data["rule_of_thumb_split"] == {"weights": 2 * 8_030_261_248, "gradients": 2 * 8_030_261_248,
                                           "optimizer": 4 * 8_030_261_248}
    assert sum(data["rule_of_thumb_split"].values()) == data["rule_of_thumb_bytes"]
    assert sum(data["layer_activation_groups"].values()) == data["layer_tensors_bytes"] > 0
    assert data["loss_saved_bytes"] == 4 * 2048 * 128_256
    assert data["korthikanti_layer"] == {"linear_bytes": 34 * 2048 * 4096, "scores_bytes": 5 * 32 * 2048 * 2048,
                                         "total_bytes": 34 * 2048 * 4096 + 5 * 32 * 2048 * 2048}


def test_train_compares_the_methods_by_name():
    """LoRA of rank 16 on every linear layer of Llama-3-8B: 32 x 16 x (8,192 + 5,120 + 5,120 +
    8,192 + 3 x 18,432) = 41,943,040 trained parameters."""
    data = json.loads(cli("train", "llama-3-8b", *FULL_MIXED, "--compare-methods", "--json").stdout)
    methods = data["methods"]
    assert list(methods) == ["full", "lora", "qlora"]
    assert methods["full"]["trainable_parameters"] == 8_030_261_248
    assert methods["lora"]["trainable_parameters"] == methods["qlora"]["trainable_parameters"] == 41_943_040
    assert methods["full"]["total_bytes"] == data["total_bytes"]  # the step --method full gives
    assert all(row["largest_micro_batch"] is None for row in methods.values())
    # (on a 24 GB card, full fine-tuning of a 1.2B model no longer fits once the CUDA context and
    # the headroom are counted: an 80 GB card, where every method does)
    on_gpu = json.loads(cli("train", "llama-3.2-1b", *FULL_MIXED, "--compare-methods", "--gpu", "a100-80gb",
                            "--json").stdout)
    assert all(row["largest_micro_batch"] >= 1 for row in on_gpu["methods"].values())
    table = cli("train", "llama-3.2-1b", *FULL_MIXED, "--compare-methods", "--gpu", "rtx4090").stdout
    assert "trained parameters" in table and "largest micro-batch" in table and "qlora" in table
    assert "34sbh + 5as^2b" in table and "master copy apart" in table


def test_train_starts_from_the_fine_tuning_chapters_case():
    """A command's defaults are the page's for the same chapter case (DESIGN.md): with no
    option, `train` prices the fine-tuning chapter's step, LoRA under bf16 autocast, 4 x 2,048
    tokens, AdamW, full checkpointing; and that step is the one the options spell out."""
    from guide.chapters import by_slug

    case = by_slug("fine-tuning").defaults
    plain = json.loads(cli("train", "llama-3.2-1b", "--json").stdout)
    assert plain["setup"] == {**plain["setup"], "method": "lora", "precision": "bf16-autocast", "optimizer": "adamw",
                              "micro_batch": 4, "sequence": 2048, "checkpointing": "full"}
    assert (case.method, case.precision, case.optimizer, case.batch, case.sequence, case.checkpointing) == (
        "lora", "bf16-autocast", "adamw", 4, 2048, "full")
    spelled = json.loads(cli("train", "llama-3.2-1b", "--method", "lora", "--precision", "bf16-autocast", "--optimizer",
                             "adamw", "--batch", "4", "--sequence", "2048", "--checkpointing", "full", "--json").stdout)
    assert spelled["total_bytes"] == plain["total_bytes"]
    # LoRA of rank 16 on every linear layer of Llama-3.2-1B (hidden 2,048, key/value 512, MLP
    # 8,192, 16 layers): 16 x 16 x ((2,048 + 2,048) x 2 + (2,048 + 512) x 2 + (2,048 + 8,192) x 3)
    assert plain["trainable_parameters"] == 16 * 16 * (4096 * 2 + 2560 * 2 + 10240 * 3) == 11_272_192
