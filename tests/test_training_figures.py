"""The figures the fine-tuning chapter's widgets show, computed by the engine and pinned by
hand: Korthikanti et al.'s layer formula, one layer's tensors by group, the rule of thumb by
component, the components of the peak, and the three methods side by side."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as hs

from calculator.models import catalog
from calculator.training import (
    LAYER_GROUPS, METHODS, PEAK_COMPONENTS, Layout, TrainingSetup, activation_model, compare_methods,
    korthikanti_layer_bytes, largest_micro_batch, lora_parameters, rule_of_thumb_bytes, rule_of_thumb_split,
    traits_from_config, training_memory,
)
from tests.test_training import GPT_TRAITS, LLAMA3_8B, A, B, H, S, gpt_layer


def llama_3_8b():
    key = "llama-3-8b"
    return catalog.stored_summary(key), catalog.stored_spec(key), traits_from_config(catalog.config(key))


# Korthikanti et al. 2022, eq. 1 / table 2 ---------------------------------------------------

def test_korthikanti_formula_by_hand():
    """s = 1,024, b = 2, h = 4,096, a = 32: 34sbh = 285,212,672 and 5as^2b = 335,544,320."""
    layer = korthikanti_layer_bytes(batch=2, sequence=1024, hidden=4096, heads=32)
    assert layer.linear_bytes == 34 * 1024 * 2 * 4096 == 285_212_672
    assert layer.scores_bytes == 5 * 32 * 1024 * 1024 * 2 == 335_544_320
    assert layer.total_bytes == 620_756_992


def test_the_gpt_layer_keeps_korthikantis_bytes_plus_the_norm_statistics():
    """The engine's GPT layer (16-bit, eager, dropout) by group, worked by hand: each LayerNorm
    keeps its input, its output and (float32) mean and 1/std; attention keeps queries, keys,
    values and output; the scores 5as^2b; the MLP its 4h-wide input and output; two dropout
    masks of one byte. Together: Korthikanti's 34sbh + 5as^2b and the 16sb of statistics."""
    summary, spec = gpt_layer()
    setup = TrainingSetup(precision="bfloat16", attention="eager", micro_batch=B, sequence=S)
    layer = activation_model(summary, spec, GPT_TRAITS, setup)
    n = S * B
    groups = {"norm": 2 * (2 * n * H + 2 * n * H + 8 * n), "attention": 8 * n * H, "scores": 5 * A * S * S * B,
              "mlp": 16 * n * H, "dropout": 2 * n * H, "lora": 0}
    assert layer.layer_groups() == groups
    assert list(layer.layer_groups()) == list(LAYER_GROUPS)
    assert layer.layer_tensors_bytes == korthikanti_layer_bytes(B, S, H, A).total_bytes + 16 * n


def test_the_loss_keeps_float32_log_probabilities_of_the_whole_vocabulary():
    summary, spec, traits = llama_3_8b()
    layer = activation_model(summary, spec, traits, TrainingSetup(micro_batch=2, sequence=8))
    assert layer.loss_saved == 4 * 2 * 8 * 128_256


# The rule of thumb by component ------------------------------------------------------------

def test_rule_of_thumb_split_is_2_2_and_4_bytes_per_parameter():
    split = rule_of_thumb_split(LLAMA3_8B)
    assert split == {"weights": 16_060_522_496, "gradients": 16_060_522_496, "optimizer": 32_121_044_992}
    assert sum(split.values()) == rule_of_thumb_bytes(LLAMA3_8B)
    assert set(split) <= set(PEAK_COMPONENTS)


# Components of a step ----------------------------------------------------------------------

def test_components_put_the_master_copy_apart():
    """Mixed precision on Llama-3-8B: 2P of 16-bit weights and the 512 bytes of rotary buffers,
    4P of master copy, 2P of gradients, 8P of Adam states."""
    summary, spec, traits = llama_3_8b()
    memory = training_memory(summary, spec, TrainingSetup(), traits=traits)
    full = memory.components()
    assert full == {"weights": 2 * LLAMA3_8B + 512, "master": 4 * LLAMA3_8B, "gradients": 2 * LLAMA3_8B,
                    "optimizer": 8 * LLAMA3_8B, "activations": memory.activations_bytes, "buffers": 0}
    peak = memory.peak_components()
    assert list(peak) == list(PEAK_COMPONENTS)
    assert peak["weights"] == 2 * LLAMA3_8B + 512 and peak["master"] == 4 * LLAMA3_8B
    assert {k: peak[k] for k in PEAK_COMPONENTS[2:]} == {k: memory.at_peak[k] for k in PEAK_COMPONENTS[2:]}
    assert sum(peak.values()) == memory.total_bytes


def test_without_a_master_copy_on_the_gpu_the_weights_stay_whole():
    summary, spec, traits = llama_3_8b()
    bf16 = training_memory(summary, spec, TrainingSetup(precision="bfloat16"), traits=traits)
    assert bf16.peak_components()["master"] == 0 and bf16.peak_components()["weights"] == bf16.at_peak["weights"]
    offloaded = training_memory(summary, spec, TrainingSetup(), Layout(4, zero=2, offload_optimizer=True), traits)
    assert offloaded.master_weights_bytes == 0
    assert offloaded.peak_components()["weights"] == offloaded.at_peak["weights"] == 2 * LLAMA3_8B + 512


CATALOG = [e.key for e in catalog.entries()]


@settings(max_examples=25, deadline=None)
@given(hs.sampled_from(CATALOG), hs.sampled_from(["mixed", "bfloat16", "amp"]), hs.sampled_from(METHODS),
       hs.sampled_from([Layout(), Layout(8), Layout(8, zero=3), Layout(4, zero=2, offload_optimizer=True)]))
def test_peak_components_always_add_up_to_the_peak(key, precision, method, layout):
    summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
    memory = training_memory(summary, spec, TrainingSetup(method=method, precision=precision, sequence=512), layout,
                             traits_from_config(catalog.config(key)))
    peak = memory.peak_components()
    assert sum(peak.values()) == memory.total_bytes and min(peak.values()) >= 0


# Full fine-tuning, LoRA and QLoRA side by side ----------------------------------------------

def test_methods_compared_by_name():
    """Rank 16 on q_proj and v_proj of Llama-3-8B: 6,815,744 trained parameters (32 layers x
    16 x ((4,096 + 4,096) + (4,096 + 1,024))), 0.0849% of the model."""
    summary, spec, traits = llama_3_8b()
    setup = TrainingSetup(micro_batch=2, sequence=512, lora_rank=16, lora_targets="q_proj,v_proj")
    methods = compare_methods(summary, spec, setup, traits=traits)
    assert list(methods) == list(METHODS) == ["full", "lora", "qlora"]
    for method, compared in methods.items():
        assert compared.method == method and compared.largest_micro_batch is None
        assert compared.memory == training_memory(summary, spec, replace(setup, method=method), traits=traits)
    assert methods["full"].trainable_parameters == LLAMA3_8B
    assert methods["lora"].trainable_parameters == methods["qlora"].trainable_parameters == 6_815_744 \
        == lora_parameters(summary, 16, "q_proj,v_proj")
    assert round(methods["lora"].trainable_percent, 4) == 0.0849
    assert methods["qlora"].memory.weights_bytes < methods["lora"].memory.weights_bytes


def test_methods_compared_on_a_gpu_give_each_ones_largest_micro_batch():
    summary, spec = catalog.stored_summary("llama-3.2-1b"), catalog.stored_spec("llama-3.2-1b")
    traits = traits_from_config(catalog.config("llama-3.2-1b"))
    setup, capacity = TrainingSetup(sequence=1024), 24 * 2**30
    methods = compare_methods(summary, spec, setup, traits=traits, capacity=capacity)
    for method, compared in methods.items():
        chosen = replace(setup, method=method)
        assert compared.largest_micro_batch == largest_micro_batch(summary, spec, capacity, chosen, traits=traits)
    assert methods["full"].largest_micro_batch < methods["lora"].largest_micro_batch
    assert methods["lora"].to_json()["largest_micro_batch"] == methods["lora"].largest_micro_batch
