"""Bad configs are refused early and clearly; old and new config formats both work."""

from __future__ import annotations

import time

import pytest

from calculator.models import catalog
from calculator.models.configs import check_config, parse_config_text, read_config_file, rough_parameter_count
from calculator.core.errors import CalculatorError
from calculator.models.meta import count_config
from tests.conftest import load_test_config


def code_of(call) -> str:
    with pytest.raises(CalculatorError) as info:
        call()
    return info.value.code


@pytest.mark.parametrize("raw,code", [
    (b"{not json", "config_not_json"),
    (b"[1, 2, 3]", "config_not_object"),
    (b"\xff\xfe\x00garbage", "config_not_text"),
    (b"[" * 100_000 + b"]" * 100_000, "config_too_nested"),
    (b" " * (3 * 1024 * 1024), "config_too_large"),
])
def test_unparseable_text(raw, code):
    assert code_of(lambda: parse_config_text(raw)) == code


@pytest.mark.parametrize("change,code", [
    ({"model_type": None}, "config_no_model_type"),
    ({"num_hidden_layers": -1}, "config_bad_value"),
    ({"num_hidden_layers": 0}, "config_bad_value"),
    ({"hidden_size": "4096"}, "config_bad_value"),
    ({"hidden_size": 4096.0}, "config_bad_value"),
    ({"vocab_size": True}, "config_bad_value"),
    ({"num_attention_heads": 10**30}, "config_bad_value"),
    ({"num_hidden_layers": 10_000_000}, "config_bad_value"),
    ({"model_type": "no-such-type"}, "unknown_model_type"),
    ({"model_type": "my_custom", "auto_map": {"AutoConfig": "x.Config"}}, "needs_remote_code"),
    ({"architectures": ["NoSuchModelForCausalLM"]}, "unknown_architecture"),
    ({"architectures": ["AutoConfig"]}, "unknown_architecture"),
    ({"architectures": ["os.system"]}, "unknown_architecture"),
])
def test_bad_configs_get_a_clear_error(change, code):
    config = {**load_test_config("tiny-llama"), **change}
    assert code_of(lambda: count_config(config)) == code


def test_absurd_but_well_typed_config_is_refused_fast():
    config = {**catalog.config("llama-3.1-405b"), "num_hidden_layers": 500, "hidden_size": 200_000,
              "intermediate_size": 250_000}
    start = time.perf_counter()
    assert code_of(lambda: count_config(config)) == "config_absurd"
    assert time.perf_counter() - start < 0.5


def test_ten_million_layers_is_refused_in_well_under_a_second():
    config = {**catalog.config("llama-2-7b"), "num_hidden_layers": 10_000_000}
    start = time.perf_counter()
    with pytest.raises(CalculatorError):
        check_config(config)
    assert time.perf_counter() - start < 0.1


def test_rough_count_stays_above_the_exact_count_for_the_catalog():
    for entry in catalog.entries():
        exact = catalog.stored_summary(entry.key).parameters
        assert rough_parameter_count(catalog.config(entry.key)) >= 0.5 * exact, entry.key


def test_old_and_new_config_formats_count_the_same():
    old = catalog.config("llama-3.1-8b")  # torch_dtype, rope_theta + rope_scaling (transformers 4)
    new = {k: v for k, v in old.items() if k not in ("torch_dtype", "rope_theta", "rope_scaling")}
    new["dtype"] = "bfloat16"
    new["rope_parameters"] = {**old["rope_scaling"], "rope_theta": old["rope_theta"]}
    assert count_config(old).parameters == count_config(new).parameters == 8_030_261_248


def test_read_config_from_file_and_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gpt2"}')
    assert read_config_file(folder)[0] == {"model_type": "gpt2"}
    assert read_config_file(folder / "config.json")[0] == {"model_type": "gpt2"}
    assert code_of(lambda: read_config_file(tmp_path / "missing.json")) == "config_file_missing"
    assert code_of(lambda: read_config_file(tmp_path)) == "config_missing_in_folder"


def test_every_error_code_has_both_languages():
    from calculator.core.messages import catalog as ui

    en = {k for k in ui("en") if k.startswith("error.")}
    fr = {k for k in ui("fr") if k.startswith("error.")}
    assert en == fr and len(en) > 20
