"""`python -m calculator serve`: the issue's JSON keys in bytes, a table with units, one-line
errors with exit code 2 (bad input, a context past the model's positions)."""

from __future__ import annotations

import json

import pytest

from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

KEYS = {"weights_bytes_per_gpu", "activation_reserve_bytes", "kv_pool_bytes_per_gpu", "kv_bytes_per_token",
        "kv_tokens", "max_concurrent_sequences", "fits", "layouts"}
BYTES = ("weights_bytes_per_gpu", "activation_reserve_bytes", "kv_pool_bytes_per_gpu", "kv_bytes_per_token",
         "total_bytes_per_gpu", "requested_bytes_per_gpu")
LAYOUT_KEYS = {"tensor", "weights_bytes_per_gpu", "kv_pool_bytes_per_gpu", "kv_tokens", "sequences_per_replica",
               "replicas", "gpus"}


def test_json_contract_and_figures():
    out = cli("serve", "llama-3.1-70b", "--gpu", "h100", "--context", "4096", "--users", "32", "--gpus", "4",
              "--engine-version", "0.19", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert KEYS <= set(data)
    assert all(isinstance(data[k], int) and not isinstance(data[k], bool) for k in BYTES)
    assert data["fits"] is True and data["verdict"] == "fits" and data["tensor_parallel"] == 4
    expected = serve(catalog_model("llama-3.1-70b"), gpu("h100"), gpus=4, context=4096, users=32, engine_version="0.19")
    assert data["kv_tokens"] == expected.replica.kv_tokens == 449_552
    assert data["max_concurrent_sequences"] == 109 and data["kv_bytes_per_token"] == 327_680
    assert [lay["tensor"] for lay in data["layouts"]] == [1, 2, 4, 8, 16]
    assert all(set(lay) == LAYOUT_KEYS for lay in data["layouts"])
    assert data["best_layout"]["gpus"] == 4 and data["engine"] == "vllm" and data["engine_version"] == "0.19"


def test_options_reach_the_calculator():
    out = cli("serve", "qwen2.5-7b", "--gpu", "H100 SXM", "--gpus", "4", "--tensor", "2", "--dtype", "fp8",
              "--kv-dtype", "fp8", "--context", "8192", "--gpu-memory-utilization", "0.95",
              "--max-num-batched-tokens", "4096", "--max-num-seqs", "128", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    expected = serve(catalog_model("qwen2.5-7b"), gpu("h100"), gpus=4, tensor=2, dtype="float8", kv_dtype="fp8",
                     context=8192, utilization=0.95, max_num_batched_tokens=4096, max_num_seqs=128)
    assert data["kv_tokens"] == expected.replica.kv_tokens
    assert data["activation_reserve_bytes"] == expected.replica.activation_reserve_bytes
    assert (data["replicas"], data["kv_dtype"], data["max_num_seqs"]) == (2, "float8", 128)
    sglang = json.loads(cli("serve", "qwen2.5-7b", "--gpu", "h100", "--engine", "sglang", "--context", "8192",
                            "--mem-fraction-static", "0.8", "--json").stdout)
    assert sglang["engine"] == "sglang" and sglang["gpu_memory_utilization"] == 0.8 and sglang["kv_blocks"] is None


def test_table_names_its_units():
    out = cli("serve", "llama-3.1-8b", "--gpu", "a100-80gb", "--context", "8192", "--users", "64", "--engine-version",
              "0.19")
    assert out.returncode == 0, out.stderr
    assert "GiB" in out.stdout and "2^30 bytes" in out.stdout
    assert "KV cache pool" in out.stdout and "Fewest GPUs" in out.stdout and "vLLM 0.19" in out.stdout


@pytest.mark.parametrize("args", [
    ("serve", "llama-2-7b", "--gpu", "h100", "--context", "4097"),  # past the model's positions
    ("serve", "llama-2-7b", "--gpu", "h100", "--context", "-5"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--users", "abc"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--gpu-memory-utilization", "1.5"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--gpu-memory-utilization", "nan"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--tensor", "3"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--gpus", "6", "--tensor", "4"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--kv-dtype", "int3"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--engine", "tgi"),
    ("serve", "llama-2-7b", "--gpu", "h100", "--cpu-offload-gb", "inf"),
    ("serve", "llama-2-7b", "--gpu", "<b>h100</b>"),
    ("serve", "llama-2-7b"),
    ("serve", "bert-base-cased", "--gpu", "h100"),
])
def test_bad_input_is_one_line_and_exit_code_2(args):
    out = cli(*args)
    assert out.returncode == 2, out.stdout[-300:]
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    if "4097" in args:
        assert "4,096 positions" in lines[0]
