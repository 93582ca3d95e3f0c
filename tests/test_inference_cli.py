"""`python -m calculator inference`: the issue's JSON keys in bytes, units in the table,
one-line errors with exit code 2."""

from __future__ import annotations

import json

from calculator.models import catalog
from calculator.core.budget import Budget
from calculator.core.gpus import gpu
from calculator.memory.inference import inference_memory, kv_cache_bytes, largest_batch, largest_context
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

KEYS = {"weights_bytes", "kv_cache_bytes", "activation_peak_bytes", "total_bytes"}


def test_json_contract_and_figures():
    out = cli("inference", "llama-2-7b", "--batch", "4", "--context", "4096", "--dtype", "float16", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert KEYS <= set(data) and all(isinstance(data[k], int) for k in KEYS)
    spec, summary = catalog.stored_spec("llama-2-7b"), catalog.stored_summary("llama-2-7b")
    assert data["kv_cache_bytes"] == kv_cache_bytes(spec, 4, 4096, "float16") == 4 * 4096 * 2 * 32 * 32 * 128 * 2
    assert data["weights_bytes"] == summary.total_bytes_at("float16")
    assert data["total_bytes"] == data["weights_bytes"] + data["kv_cache_bytes"] + data["activation_peak_bytes"]
    assert (data["model"], data["source"], data["mode"], data["attention_used"]) == (
        "meta-llama/Llama-2-7b-hf", "catalog", "generate", "sdpa")


def test_options_reach_the_calculator():
    out = cli("inference", "mistral-7b-v0.1", "--batch", "2", "--context", "8192", "--kv-dtype", "float8",
              "--attention", "eager", "--mode", "loglikelihood", "--gpu", "a100-80gb", "--json")
    data = json.loads(out.stdout)
    spec, summary = catalog.stored_spec("mistral-7b-v0.1"), catalog.stored_summary("mistral-7b-v0.1")
    options = {"dtype": "bfloat16", "kv_dtype": "float8", "attention": "eager", "mode": "loglikelihood"}
    expected = inference_memory(summary, spec, 2, 8192, **options)
    assert data["total_bytes"] == expected.total_bytes and data["kv_dtype"] == "float8"
    card = gpu("a100-80gb")
    budget = Budget(card)
    readings = budget.readings(expected.total_bytes, expected.steady_bytes, expected.rounding_bytes)
    assert data["gpu_memory_bytes"] == card.memory_bytes and data["usable_bytes"] == card.usable_bytes
    assert data["reserved_bytes"] == readings.reserved_bytes > expected.total_bytes
    assert data["nvidia_smi_bytes"] == readings.reserved_bytes + card.context_bytes
    assert data["verdict"] == readings.verdict and data["fits"] == (readings.verdict == "fits")
    assert data["largest_batch"] == largest_batch(summary, spec, budget, 8192, **options)
    assert data["largest_context"] == largest_context(summary, spec, budget, 2, **options)
    # inside the headroom is "tight": never smaller than what fits with the headroom kept
    assert data["largest_batch_tight"] >= data["largest_batch"] and data["largest_context_tight"] >= data["largest_context"]


def test_table_names_its_units():
    out = cli("inference", "gemma-2-9b", "--batch", "1", "--context", "2048")
    assert out.returncode == 0, out.stderr
    assert "GiB" in out.stdout and "2^30 bytes" in out.stdout
    assert "eager" in out.stdout  # Gemma 2 has no SDPA path in transformers


def test_bad_input_is_one_line_and_exit_code_2():
    for args in (["--batch", "0", "--context", "10"], ["--batch", "1", "--context", "-5"],
                 ["--batch", "1", "--context", "10", "--mode", "train"], ["--batch", "x", "--context", "10"],
                 ["--batch", "1", "--context", "10", "--kv-dtype", "int3"], ["--batch", "1", "--context", "10", "--gpu", "nope"]):
        out = cli("inference", "gpt2", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr


def test_the_lengths_are_asked_for_once_whatever_was_given():
    """Neither length, both, or --new-tokens beside --context: one message that fits each case
    (it used to end "not both" when neither was given), in English and in French."""
    for args in ([], ["--context", "10", "--prompt", "5"], ["--context", "10", "--new-tokens", "4"]):
        for lang, words in (("en", "exactly one of --context"), ("fr", "une seule de ces deux options")):
            out = cli("inference", "gpt2", "--batch", "1", *args, "--lang", lang)
            assert out.returncode == 2 and words in out.stderr and "--prompt (" in out.stderr, (args, out.stderr)
