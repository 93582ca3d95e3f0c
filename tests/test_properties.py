"""Properties that must hold for any model and any count (hypothesis)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings, strategies as st

from calculator.models.meta import count_config
from calculator.core.precision import DTYPES, bytes_per_param, parameter_bytes, rule_of_thumb_bytes
from tests.conftest import load_test_config

counts = st.integers(min_value=1, max_value=10**13)


@given(counts)
def test_float16_parameter_bytes_are_half_of_float32(n):
    assert parameter_bytes(n, "float32") == 2 * parameter_bytes(n, "float16")


@given(counts, st.sampled_from(DTYPES))
def test_rule_of_thumb_is_1_1_times_the_bare_product(n, dtype):
    exact = Fraction(n) * bytes_per_param(dtype) * Fraction(11, 10)
    assert rule_of_thumb_bytes(n, dtype) - 1 < exact <= rule_of_thumb_bytes(n, dtype)
    assert rule_of_thumb_bytes(n, dtype) >= parameter_bytes(n, dtype)


small_llamas = st.fixed_dictionaries({
    "num_hidden_layers": st.integers(1, 6),
    "heads": st.sampled_from([1, 2, 4]),
    "head_dim": st.sampled_from([4, 8, 16]),
    "intermediate_size": st.integers(1, 256),
    "vocab_size": st.integers(1, 512),
})


def llama(layers: int, heads: int, head_dim: int, ffn: int, vocab: int) -> dict:
    return {**load_test_config("tiny-llama"), "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads, "hidden_size": heads * head_dim, "intermediate_size": ffn,
            "vocab_size": vocab}


@settings(max_examples=15, deadline=None)
@given(small_llamas)
def test_more_layers_or_a_wider_model_never_count_less(p):
    base = llama(p["num_hidden_layers"], p["heads"], p["head_dim"], p["intermediate_size"], p["vocab_size"])
    deeper = {**base, "num_hidden_layers": base["num_hidden_layers"] + 1}
    wider = llama(p["num_hidden_layers"], p["heads"], p["head_dim"] * 2, p["intermediate_size"], p["vocab_size"])
    n = count_config(base).parameters
    assert count_config(deeper).parameters > n
    assert count_config(wider).parameters > n


@settings(max_examples=15, deadline=None)
@given(small_llamas)
def test_float16_model_bytes_are_half_of_float32_but_for_buffers(p):
    s = count_config(llama(p["num_hidden_layers"], p["heads"], p["head_dim"], p["intermediate_size"], p["vocab_size"]))
    params32 = s.total_bytes_at("float32") - s.buffer_bytes_at("float32")
    params16 = s.total_bytes_at("float16") - s.buffer_bytes_at("float16")
    assert params32 == 2 * params16 == 4 * s.parameters
