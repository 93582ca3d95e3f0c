"""Training figures over the catalog, pinned: the peak and its phases for every catalog model
under four setups and three layouts, the largest micro-batch of each method on an 80 GB GPU
and the fewest GPUs of each strategy. tests/training_golden.json was written by the engine as
it was before calculator/training.py became a package; a change here is a change of formula,
to be made on purpose:

    python -m tests.test_training_golden   # rewrites tests/training_golden.json
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.training import (
    STRATEGIES, Layout, TrainingSetup, fewest_gpus, largest_micro_batch, traits_from_config, training_memory,
)

GOLDEN = Path(__file__).with_name("training_golden.json")
SETUPS = (
    TrainingSetup(micro_batch=2, sequence=384),
    TrainingSetup(method="lora", precision="amp", checkpointing="selective", attention="eager", micro_batch=2,
                  sequence=384),
    TrainingSetup(method="qlora", precision="bfloat16", checkpointing="full", micro_batch=2, sequence=384,
                  adapter_dtype="base", kbit_prepare=False),  # the pre-split semantics the file was written with
    TrainingSetup(precision="float32", device="cpu", micro_batch=2, sequence=384),
)
LAYOUTS = (Layout(), Layout(8, zero=3, accounting="deepspeed"), Layout(16, tensor=2, pipeline=2, zero=1))
CAPACITY = 80 * 10**9
PEAK = ("total_bytes", "forward_backward_bytes", "optimizer_step_bytes", "activations_bytes", "peak_moment")


def figures(key: str) -> dict:
    summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
    traits = traits_from_config(catalog.config(key))
    found: dict = {"peaks": [], "largest_micro_batch": {}, "fewest_gpus": {}}
    for setup in SETUPS:
        for layout in LAYOUTS:
            try:
                memory = training_memory(summary, spec, setup, layout, traits).to_json()
                found["peaks"].append([memory[name] for name in PEAK])
            except CalculatorError as error:
                found["peaks"].append(error.code)
    for method in ("full", "lora", "qlora"):
        setup = TrainingSetup(method=method, sequence=1024, adapter_dtype="base", kbit_prepare=False)
        found["largest_micro_batch"][method] = largest_micro_batch(summary, spec, CAPACITY, setup, traits=traits)
    for strategy in STRATEGIES:
        found["fewest_gpus"][strategy] = fewest_gpus(summary, spec, CAPACITY, strategy, TrainingSetup(sequence=1024),
                                                     traits).gpus
    return found


@pytest.mark.parametrize("key", [e.key for e in catalog.entries()])
def test_training_figures_are_unchanged(key):
    assert figures(key) == json.loads(GOLDEN.read_text())[key]


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({e.key: figures(e.key) for e in catalog.entries()}, separators=(",", ":"))
                      .replace('},"', '},\n"') + "\n")
