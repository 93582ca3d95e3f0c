"""The training engine as a package: every name the single module had is still importable
from calculator.training, importing it needs no torch, and no sum reads a tensor's label."""

from __future__ import annotations

from dataclasses import replace
import hashlib
import importlib
import pkgutil
import subprocess
import sys

import pytest

import calculator.training as training
from calculator.core.errors import CalculatorError
from calculator.core.memo import forget_kept
from calculator.models.seam import catalog_model
from calculator.training import Layout, TrainingSetup, activation_model, training_memory

# Every public name of calculator/training.py before it became a package.
PUBLIC = (
    "PRECISIONS", "OPTIMIZERS", "METHODS", "CHECKPOINTING", "ATTENTION", "OPTIMIZER_IMPLS", "DEVICES", "ACCOUNTINGS",
    "STRATEGIES", "ZERO_STAGES", "ALL_LINEAR", "MAX_TOKENS", "MAX_BATCH", "MAX_GPUS", "MAX_RANK", "GPUS_PER_NODE",
    "Precision", "PRECISION_BYTES", "BNB_BLOCK", "BNB_MIN_8BIT", "BNB_QMAPS_BYTES", "NF4_BLOCK", "NF4_SCALE_BLOCK",
    "TrainingSetup", "Layout", "ACTIVATION_KEEPS", "NAME_ROLES", "linear_role", "check_setup", "check_layout",
    "TensorGroup", "full_tensors", "lora_modules", "lora_rank_of", "lora_parameters", "lora_tensors",
    "optimizer_state_bytes", "optimizer_step_temporary", "nf4_bytes", "quantized_base_bytes",
    "largest_module_parameters", "Saved", "Moment", "ActivationModel", "activation_model", "layer_activation_bytes",
    "TrainingMemory", "model_traits_default", "training_memory", "largest_micro_batch", "strategy_layout",
    "candidate_gpu_counts", "GpuCount", "fewest_gpus", "rule_of_thumb_bytes", "ModelTraits", "traits_from_config",
)


def test_every_former_public_name_is_still_exported():
    assert [name for name in PUBLIC if name not in training.__all__] == []
    assert all(hasattr(training, name) for name in training.__all__)


def test_importing_the_engine_needs_neither_torch_nor_streamlit():
    code = "import sys, calculator.training; print('torch' in sys.modules, 'streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# Roles, not labels: renaming every kept tensor changes no number ----------------------------

MODELS = ("gpt2", "t5-small", "llama-3.2-1b", "qwen3-30b-a3b", "deepseek-v2-lite", "gemma-2-9b", "bert-base-cased")
SETUPS = (
    TrainingSetup(micro_batch=2, sequence=256),
    TrainingSetup(method="lora", precision="amp", attention="eager", micro_batch=2, sequence=256),
    TrainingSetup(method="lora", lora_targets="q_proj,v_proj", micro_batch=1, sequence=128),
    TrainingSetup(method="qlora", checkpointing="selective", attention="eager", device="cpu", sequence=128),
    TrainingSetup(precision="float32", attention="eager", device="cpu", sequence=128, micro_batch=3),
)
LAYOUTS = (Layout(), Layout(2, tensor=2), Layout(4, pipeline=2, tensor=2, sequence_parallel=False))


def activation_models(model):
    """(setup, its activation model) for each setup; None where the model lacks the LoRA targets."""
    for setup in SETUPS:
        try:
            yield setup, activation_model(model.summary, model.spec, model.traits, setup)
        except CalculatorError:
            yield setup, None


def figures() -> list:
    found = []
    for key in MODELS:
        model = catalog_model(key)
        for setup, acts in activation_models(model):
            if acts is None:
                found.append(None)
                continue
            found.append([(s.bytes, s.role, s.site, s.group, s.part, s.quadratic) for s in acts.layer])
            found.append((acts.moments, acts.first_layer_saving, acts.loss_saved, acts.labels_saved))
            for layout in LAYOUTS:
                try:
                    found.append(training_memory(model.summary, model.spec, setup, layout, model.traits).to_json())
                except CalculatorError as error:  # a layout this model cannot use
                    found.append(error.code)
    return found


def test_renaming_every_kept_tensor_changes_no_number(monkeypatch):
    plain = figures()
    real = training.Saved
    made = []

    def renamed(name, *args, **kwargs):
        made.append(name)
        return real("renamed " + hashlib.sha1(name.encode()).hexdigest()[:12], *args, **kwargs)  # noqa: S324

    modules = [importlib.import_module(f"calculator.training.{info.name}")
               for info in pkgutil.iter_modules(training.__path__)]
    for module in [m for m in modules if getattr(m, "Saved", None) is real]:
        monkeypatch.setattr(module, "Saved", renamed)
    try:
        forget_kept()  # answers kept by their inputs: computed again with the new labels
        assert figures() == plain
    finally:
        forget_kept()  # no renamed tensor stays for the other tests
    assert made and {"labels", "token ids", "attention norm: 1/rms"} <= set(made)


def test_a_kept_tensors_label_is_free_text():
    saved = training.Saved("anything at all", 10, "norm", "attention", tensor_parallel=False)
    assert (saved.group, saved.part, saved.quadratic) == ("norm", "attention", False)
    assert replace(saved, role="scores").quadratic and replace(saved, site="cross-attention").part == "attention"


@pytest.mark.parametrize("key", MODELS)
def test_every_kept_tensor_has_a_known_role_and_site(key):
    for _, acts in activation_models(catalog_model(key)):
        if acts is None:
            continue
        for saved in acts.layer + acts.embedding + acts.head:
            assert saved.role in training.ROLES and saved.site in training.SITES, saved
        assert {s.group for s in acts.layer} <= set(training.LAYER_GROUPS)
