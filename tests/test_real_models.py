"""The engine's bytes equal the bytes of the same model really built on the CPU."""

from __future__ import annotations

import pytest
import torch
import transformers

from calculator.models import catalog
from calculator.models.meta import count_config, make_config
from tests.conftest import load_test_config

CASES = {
    "gpt2": lambda: catalog.config("gpt2"),
    "bert-base-cased": lambda: catalog.config("bert-base-cased"),
    "t5-small": lambda: catalog.config("t5-small"),
    "tiny-llama": lambda: load_test_config("tiny-llama"),
    "tiny-mixtral": lambda: load_test_config("tiny-mixtral"),
    "tiny-gemma2": lambda: load_test_config("tiny-gemma2"),
}
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def build_real(config: dict, model_class: str, dtype: torch.dtype):
    cfg = make_config(config)
    torch.manual_seed(0)
    if model_class == "base":
        return transformers.AutoModel.from_config(cfg, dtype=dtype)
    return getattr(transformers, config["architectures"][0])._from_config(cfg, dtype=dtype)


def real_bytes(model) -> int:
    tensors = list(model.parameters()) + list(model.buffers())  # both yield shared tensors once
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("model_class", ["auto", "base"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(CASES))
def test_bytes_equal_a_real_cpu_build(name, dtype, model_class):
    config = CASES[name]()
    model = build_real(config, model_class, TORCH_DTYPES[dtype])
    summary = count_config(config, model_class)
    assert summary.parameters == sum(p.numel() for p in model.parameters())
    assert summary.total_bytes_at(dtype) == real_bytes(model)
    assert summary.architecture == type(model).__name__


@pytest.mark.parametrize("name", ["gpt2", "tiny-llama", "tiny-mixtral"])
def test_largest_layer_matches_accelerate_on_the_real_model(name):
    from accelerate.utils import calculate_maximum_sizes

    config = CASES[name]()
    model = build_real(config, "auto", torch.float32)
    total, (largest_bytes, largest_names) = calculate_maximum_sizes(model)
    summary = count_config(config, "auto")
    unit = summary.largest_unit_at("float32")
    assert summary.total_bytes_at("float32") == total
    assert (unit.bytes_at("float32"), unit.name) == (largest_bytes, largest_names[0])


def test_tied_weights_are_counted_once():
    gpt2 = count_config(catalog.config("gpt2"))
    # 50257 x 768 token embeddings shared with lm_head: counted once, published total.
    assert gpt2.parameters == 124_439_808
    assert gpt2.groups["head"] == 0


def test_mixture_of_experts_active_parameters_by_hand():
    config = load_test_config("tiny-mixtral")
    summary = count_config(config)
    hidden, ffn, experts, top_k, layers = 64, 96, 4, 2, 2
    per_expert = 2 * ffn * hidden + hidden * ffn  # gate_up_proj and down_proj
    routed = layers * experts * per_expert
    assert summary.groups["experts"] == routed
    assert summary.active_parameters == summary.parameters - routed + layers * top_k * per_expert


def test_dense_models_have_no_active_count():
    assert count_config(load_test_config("tiny-llama")).active_parameters is None


def test_trainable_equals_parameters_for_a_fresh_model():
    summary = count_config(load_test_config("tiny-llama"))
    assert summary.trainable_parameters == summary.parameters


def test_matrix_shapes_add_up_to_the_matrix_groups():
    from calculator.models import catalog

    for entry in catalog.entries():
        summary = catalog.stored_summary(entry.key)
        listed = sum(m.parameters for m in summary.linears if m.kind != "tied-head")
        assert listed == summary.groups["linear"] + summary.groups["experts"] + summary.groups["head"], entry.key


def test_matrix_shapes_of_llama_by_hand():
    summary = count_config(load_test_config("tiny-llama"))  # hidden 64, 4 heads, 2 KV heads, MLP 172
    shapes = {m.name: (m.in_features, m.out_features, m.count, m.kind) for m in summary.linears}
    assert shapes["q_proj"] == (64, 64, 3, "linear")
    assert shapes["k_proj"] == (64, 32, 3, "linear")
    assert shapes["down_proj"] == (172, 64, 3, "linear")
    assert shapes["lm_head"] == (64, 1000, 1, "head")
