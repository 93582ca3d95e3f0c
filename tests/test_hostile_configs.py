"""Hostile configs: fuzzed with hypothesis over real config shapes. Whatever comes in, the
engine answers with a count or a clear CalculatorError: no other exception, no hang, and an
absurd config is refused before anything is built."""

from __future__ import annotations

import json
import math
import time

from hypothesis import HealthCheck, event, given, settings, strategies as st
import pytest

from calculator.models import catalog
from calculator.models.configs import parse_config_text
from calculator.core.errors import CalculatorError
from calculator.models.seam import resolve_config

SMALL_MODELS = ["gpt2", "bert-base-cased", "t5-small", "distilbert-base-uncased", "pythia-160m", "vit-base-patch16-224"]
SIZE_KEYS = ["num_hidden_layers", "n_layer", "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head",
             "num_key_value_heads", "intermediate_size", "vocab_size", "max_position_embeddings", "n_positions",
             "num_local_experts", "num_experts_per_tok", "head_dim", "d_ff", "num_layers", "num_heads"]

unicode_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
nested = st.recursive(st.none() | st.booleans() | st.integers() | unicode_text,
                      lambda children: st.lists(children, max_size=3) | st.dictionaries(unicode_text, children, max_size=3),
                      max_leaves=20)
hostile_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([-1, 0, 1, 2**31, 2**63, 10**7, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True), unicode_text, nested,
)


@pytest.fixture(scope="module", autouse=True)
def warm_build_worker():
    """Start the build worker before the clock of the first example runs (its start, torch and
    transformers imported, is not what these tests time)."""
    resolve_config(catalog.config("gpt2"), "warm-up")


def mutate(base: dict, deletions: list[str], changes: dict) -> dict:
    config = {k: v for k, v in base.items() if k not in deletions}
    config.update(changes)
    return config


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(SMALL_MODELS),
    deletions=st.lists(st.sampled_from(SIZE_KEYS + ["model_type", "architectures", "vocab_size"]), max_size=3),
    changes=st.dictionaries(st.sampled_from(SIZE_KEYS + ["model_type", "architectures", "auto_map", "torch_dtype"])
                            | unicode_text, hostile_values, max_size=4),
)
def test_fuzzed_configs_give_a_count_or_a_clear_error(model, deletions, changes):
    config = mutate(catalog.config(model), deletions, changes)
    start = time.perf_counter()
    try:
        resolved = resolve_config(config, "fuzz")
    except CalculatorError as error:
        event(f"refused: {error.code}")
        assert error.message("en") and error.message("fr")  # every placeholder has its value
    else:
        event("counted")
        assert resolved.summary.parameters > 0
        assert resolved.spec.hidden > 0
    assert time.perf_counter() - start < 10


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048) | unicode_text.map(str.encode) | nested.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_parse_to_a_dict_or_a_clear_error(raw):
    try:
        parsed = parse_config_text(raw)
    except CalculatorError as error:
        assert error.message("fr")
    else:
        assert isinstance(parsed, dict)


def test_deeply_nested_json_is_refused_without_recursion_errors():
    deep = b'{"a": ' * 50_000 + b"1" + b"}" * 50_000
    start = time.perf_counter()
    try:
        parse_config_text(deep)
        assert False, "a 50,000-level config must be refused"
    except CalculatorError as error:
        assert error.code in ("config_too_nested", "config_not_json")
    assert time.perf_counter() - start < 1


def test_nan_and_infinity_sizes_are_refused():
    for value in (math.nan, math.inf, -math.inf):
        config = {**catalog.config("gpt2"), "n_embd": value}
        try:
            resolve_config(config, "x")
            assert False
        except CalculatorError as error:
            assert error.code == "config_bad_value"


@pytest.mark.parametrize("model,key", [("t5-small", "d_model"), ("llama-3.2-1b", "hidden_size")])
def test_a_model_of_width_zero_is_refused(model, key):
    """transformers builds these (T5: 512 parameters, Llama: none): a count of nothing is no answer."""
    with pytest.raises(CalculatorError) as refused:
        resolve_config({**catalog.config(model), key: 0}, "zero")
    assert refused.value.code == "config_bad_value" and refused.value.params["key"] == key
