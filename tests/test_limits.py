"""One table of limits (calculator/core/limits.py) for the engine, the case bar, the calculators'
overrides and the CLI: every bad value is refused with a message naming that value, in both
languages, and the CLI refuses exactly what the page refuses."""

from __future__ import annotations

import subprocess

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.limits import LIMITS, check
from calculator.core.messages import catalog
from tests.cli_runner import run_cli


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_each_limit_is_named_in_both_languages(name):
    limit = LIMITS[name]
    assert limit.kind == "whole" and 1 <= limit.low < limit.high and limit.unit
    for lang in ("en", "fr"):
        assert f"limits.{name}" in catalog(lang)
    with pytest.raises(CalculatorError) as error:
        check(name, limit.high + 1)
    english, french = error.value.message("en"), error.value.message("fr")
    assert english.startswith(catalog("en")[f"limits.{name}"]) and f"(got {limit.high + 1})" in english
    assert french.startswith(catalog("fr")[f"limits.{name}"]) and "doit être un nombre entier" in french


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3", None, 10**30])
def test_what_is_not_a_whole_number_in_range_is_refused(value):
    with pytest.raises(CalculatorError) as error:
        check("batch", value)
    assert error.value.code == "out_of_range"


def test_the_case_bar_and_the_overrides_take_the_engines_bounds():
    from guide.case import WHOLE_NUMBERS, whole_number
    from guide.inputs.common import OVERRIDE_NUMBERS

    assert OVERRIDE_NUMBERS == WHOLE_NUMBERS == {name: LIMITS[name].high for name in WHOLE_NUMBERS}
    assert whole_number("5000", WHOLE_NUMBERS["batch"]) == 5000 == check("batch", 5000)  # one answer everywhere
    with pytest.raises(ValueError):
        whole_number(str(LIMITS["batch"].high + 1), WHOLE_NUMBERS["batch"])


def test_the_engine_names_the_value_it_refuses():
    from calculator.models import catalog as models
    from calculator.memory.inference import inference_memory
    from calculator.training import TrainingSetup, check_setup

    summary, spec = models.stored_summary("gpt2"), models.stored_spec("gpt2")
    with pytest.raises(CalculatorError, match="^The batch must"):
        inference_memory(summary, spec, 0, 128)
    with pytest.raises(CalculatorError, match="^The context must"):
        inference_memory(summary, spec, 1, 0)
    with pytest.raises(CalculatorError, match="^The micro-batch must"):
        check_setup(TrainingSetup(micro_batch=0))


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args)  # in this process (tests/cli_runner.py)


@pytest.mark.parametrize("args, name", [
    (("data-parallel", "gpt2", "--gpu", "t4", "--samples", "1000", "--nodes", "0"), "nodes"),
    (("data-parallel", "gpt2", "--gpu", "t4", "--samples", "1000", "--gpus-per-node", str(10**12)), "gpus_per_node"),
    (("data-parallel", "gpt2", "--gpu", "t4", "--samples", str(10**15)), "samples"),
    (("data-parallel", "gpt2", "--gpu", "t4", "--samples", "10", "--tokens", "0"), "tokens"),
    (("serve", "llama-3.1-8b", "--gpu", "h100", "--max-num-seqs", "0"), "max_num_seqs"),
    (("serve", "llama-3.1-8b", "--gpu", "h100", "--max-num-batched-tokens", "0"), "max_num_batched_tokens"),
    (("serve", "llama-3.1-8b", "--gpu", "h100", "--tensor", "1", "--gpus", str(10**12)), "gpus"),
    (("serve", "llama-3.1-8b", "--gpu", "h100", "--users", "0"), "users"),
    (("train", "gpt2", "--gpus", str(10**12)), "gpus"),
    (("train", "gpt2", "--batch", "0"), "micro_batch"),
    (("speed", "gpt2", "--gpu", "t4", "--prompt", "0"), "prompt"),
    (("inference", "gpt2", "--batch", str(10**7), "--context", "128"), "batch"),
])
def test_the_cli_refuses_out_of_range_values_by_name(args, name):
    done = cli(*args)
    assert done.returncode == 2 and not done.stdout, done.stdout[-300:]
    assert done.stderr.startswith("error: " + catalog("en")[f"limits.{name}"] + " must be a whole number")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_the_pages_own_inputs_take_the_cli_bounds():
    """The data-parallel calculator's samples, GPUs per node and nodes, and the engine-settings
    calculator's max_num_seqs, offer exactly the range the CLI accepts."""
    from tests.apptest import open_page

    at = open_page("slow-model", "en")
    fields = {n.key: n for n in at.number_input}
    for key, name in (("dp_samples", "samples"), ("dp_per_node", "gpus_per_node"), ("dp_nodes", "nodes")):
        assert (fields[key].min, fields[key].max) == (LIMITS[name].low, LIMITS[name].high)
    at = open_page("serving", "en")
    seqs = {n.key: n for n in at.number_input}["sve_seqs"]
    assert (seqs.min, seqs.max) == (LIMITS["max_num_seqs"].low, LIMITS["max_num_seqs"].high)
