"""Hostile command lines: every command, fed wrong types, absurd sizes, paths, HTML and
unknown names, answers with exit code 2 and one line that says what is wrong; never a
traceback, never a hang."""

from __future__ import annotations

import pytest

from tests.test_cli import cli

M = "gpt2"
CASES = {
    "estimate: path traversal": ["estimate", "../../../../etc/passwd"],
    "estimate: html id": ["estimate", "<script>alert(1)</script>"],
    "estimate: unicode id": ["estimate", "modèle/🤖"],
    "estimate: bad dtype": ["estimate", M, "--dtypes", "float64"],
    "speed: negative batch": ["speed", M, "--gpu", "h100", "--batches", "-1"],
    "speed: absurd batch": ["speed", M, "--gpu", "h100", "--batches", "1000000000000"],
    "speed: text batch": ["speed", M, "--gpu", "h100", "--batches", "abc"],
    "speed: unknown gpu": ["speed", M, "--gpu", "<b>h100</b>"],
    "data-parallel: zero nodes": ["data-parallel", M, "--gpu", "h100", "--samples", "10", "--nodes", "0"],
    "data-parallel: float samples": ["data-parallel", M, "--gpu", "h100", "--samples", "1e30"],
    "inference: negative batch": ["inference", M, "--batch", "-1", "--context", "10"],
    "inference: huge context": ["inference", M, "--batch", "1", "--context", "99999999999"],
    "inference: bad attention": ["inference", M, "--batch", "1", "--context", "10", "--attention", "flash"],
    "inference: bad kv dtype": ["inference", M, "--batch", "1", "--context", "10", "--kv-dtype", "int3"],
    "safetensors: bad id": ["safetensors", "../../etc"],
    "safetensors: offline": ["safetensors", "org/model"],
    "quantize: bad format": ["quantize", M, "--formats", "Q1_X"],
    "quantize: bad group": ["quantize", M, "--group-size", "7"],
    "pipeline: zero gpus": ["pipeline", M, "--gpus", "0"],
    "pipeline: absurd gpus": ["pipeline", M, "--gpus", "100000000"],
    "tensor-parallel: degree not dividing heads": ["tensor-parallel", M, "--degree", "7"],
    "tensor-parallel: negative tokens": ["tensor-parallel", M, "--degree", "2", "--tokens", "-5"],
    "offload: unparsable budget": ["offload", M, "--gpu-memory", "lots", "--cpu-memory", "1GiB"],
    "offload: negative budget": ["offload", M, "--gpu-memory", "-3GiB", "--cpu-memory", "1GiB"],
    "offload: bad quantization": ["offload", M, "--quantization", "gptq"],
    "offload: unparsable cpu limit": ["offload", M, "--cpu-memory", "<b>lots</b>"],
    "llama-cpp: unknown type": ["llama-cpp", M, "--type", "Q1_X"],
    "llama-cpp: huge context": ["llama-cpp", M, "--context", "99999999999"],
    "llama-cpp: nan bandwidth": ["llama-cpp", M, "--cpu-bandwidth", "nan"],
    "llama-cpp: encoder model": ["llama-cpp", "bert-base-cased"],
    "train: negative batch": ["train", M, "--batch", "-2"],
    "train: bad zero stage": ["train", M, "--zero", "4"],
    "train: bad lora targets": ["train", M, "--method", "lora", "--lora-targets", "no_such_module"],
    "train: absurd gpus": ["train", M, "--gpus", "10000000000"],
    # found by probing every command's numeric and text arguments
    "offload: 1e308GiB": ["offload", "llama-3-8b", "--gpu-memory", "1e308GiB", "--cpu-memory", "1GiB"],
    "offload: infinite cpu budget": ["offload", M, "--gpu-memory", "1GiB", "--cpu-memory", "infGiB"],
    "offload: 400-digit budget": ["offload", M, "--gpu-memory", "9" * 400 + "B", "--cpu-memory", "1GiB"],
    "offload: NaN budget": ["offload", M, "--gpu-memory", "nanGiB", "--cpu-memory", "1GiB"],
    "offload: empty gpu": ["offload", M, "--gpu-memory", "1GiB", "--cpu-memory", "1GiB", "--gpu", ""],
    "estimate: 300-character name": ["estimate", "x" * 300],
    "estimate: 5000-character name": ["estimate", "a/" + "b" * 5000],
    "estimate: unknown home directory": ["estimate", "~nosuchuser123/config.json"],
    "estimate: a device as config": ["estimate", "/dev/zero"],
    "estimate: empty gpu": ["estimate", M, "--gpu", ""],
    "estimate: blank dtype": ["estimate", M, "--dtypes", " "],
    "speed: 300-character name": ["speed", "x" * 300, "--gpu", "h100"],
    "speed: empty gpu": ["speed", M, "--gpu", ""],
    "speed: negative prompt": ["speed", M, "--gpu", "h100", "--prompt", "-1"],
    "speed: no new tokens": ["speed", M, "--gpu", "h100", "--new-tokens", "0"],
    "speed: 400-digit batch": ["speed", M, "--gpu", "h100", "--batches", "9" * 400],
    "speed: infinite prompt": ["speed", M, "--gpu", "h100", "--prompt", "inf"],
    "inference: new tokens with a context": ["inference", M, "--batch", "1", "--context", "10", "--new-tokens", "-1"],
    "inference: empty kv dtype": ["inference", M, "--batch", "1", "--context", "10", "--kv-dtype", ""],
    "inference: 1e309 context": ["inference", M, "--batch", "1", "--context", "1e309"],
    "tensor-parallel: empty gpu": ["tensor-parallel", M, "--degree", "2", "--gpu", ""],
    "pipeline: 400-digit micro-batches": ["pipeline", M, "--gpus", "2", "--micro-batches", "9" * 400],
    "data-parallel: 300-character name": ["data-parallel", "x" * 300, "--gpu", "h100", "--samples", "10"],
    "train: 300-character name": ["train", "x" * 300],
    "train: 400-digit sequence": ["train", M, "--sequence", "9" * 400],
    "quantize: 300-character name": ["quantize", "x" * 300],
    "quantize: huge prompt": ["quantize", M, "--gpu", "t4", "--prompt", "100000000000"],
    "quantize: no new tokens": ["quantize", M, "--gpu", "t4", "--new-tokens", "0"],
    "quantize: zero batch": ["quantize", M, "--gpu", "t4", "--batch", "0"],
    "data-parallel: bad dtype": ["data-parallel", M, "--gpu", "t4", "--samples", "10", "--dtype", "float64"],
    "safetensors: 300-character id": ["safetensors", "x" * 300],
    "accuracy: no such results folder": ["accuracy", "--results", "/no/such/folder"],
    "accuracy: 300-character folder": ["accuracy", "--results", "x" * 300],
}


@pytest.mark.parametrize("args", CASES.values(), ids=CASES.keys())
def test_hostile_command_lines_get_one_clear_line(args):
    out = cli(*args, env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2, (out.returncode, out.stdout[-300:], out.stderr[-300:])
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr


def test_a_config_of_a_hundred_million_labels_is_one_line(tmp_path):
    """The probe's 800-byte config.json: 207 s and 22.7 GB before; refused at once now."""
    import json
    import time

    from calculator.models import catalog

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**catalog.config("bert-base-cased"), "architectures": ["BertForSequenceClassification"],
                                "num_labels": 100_000_000}))
    start = time.perf_counter()
    out = cli("estimate", str(path))
    assert time.perf_counter() - start < 20
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "num_labels" in out.stderr
