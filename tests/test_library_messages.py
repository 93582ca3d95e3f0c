"""transformers' refusals of real configs inside a refusal: the causes readers meet are said in
our words in each language, the numbers and names kept; any other keeps
transformers' own words as evidence, framed in French as transformers' message in English."""

from __future__ import annotations

import pytest

import guide.typography  # noqa: F401  (registers French typography, as the guide does)
from calculator.core.errors import CalculatorError
from calculator.core.messages import text
from calculator.models import meta
from guide.format import escape_markdown

_INDIVISIBLE = {"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3}
_INDIVISIBLE_GPT2 = {"model_type": "gpt2", "n_embd": 100, "n_head": 3}
_UNKNOWN_ROPE = {"model_type": "llama", "rope_scaling": {"rope_type": "no-such-rope"}}
_UNKNOWN_ACTIVATION = {"model_type": "llama", "hidden_act": "nope"}
_NOT_A_BOOL = {"model_type": "llama", "tie_word_embeddings": "yes"}
_NOT_AN_INT = {"model_type": "mistral", "sliding_window": "x"}
_NOT_A_DTYPE = {"model_type": "llama", "torch_dtype": "float99"}
_UNKNOWN_LAYER_TYPE = {"model_type": "llama", "num_hidden_layers": 2, "layer_types": ["x", "full_attention"]}
_LAYER_TYPE_COUNT = {"model_type": "llama", "num_hidden_layers": 3, "layer_types": ["full_attention"] * 99}
_ROPE_WITHOUT_FACTOR = {"model_type": "llama", "rope_scaling": {"rope_type": "linear"}}  # nobody mapped it


def plain(message: str) -> str:
    """French typography's no-break spaces as typed spaces."""
    return message.replace("\u202f", " ").replace("\u00a0", " ")


def _refusal(config: dict) -> CalculatorError:
    with pytest.raises(CalculatorError) as caught:
        meta.build_empty_model(meta.make_config(config))
    return caught.value


def _as_the_page_shows(error: CalculatorError, lang: str) -> str:
    params = {key: escape_markdown(value, 400) for key, value in error.shown_params(lang).items()}
    return text(f"error.{error.code}", lang, **params)


@pytest.mark.parametrize("config, code, cause, data", [
    (_INDIVISIBLE, "invalid_config", "tf_heads_divide", {"hidden": "100", "heads": "3"}),
    (_INDIVISIBLE_GPT2, "build_failed", "tf_heads_divide", {"hidden": "100", "heads": "3"}),
    (_UNKNOWN_ROPE, "build_failed", "tf_unknown_value", {"value": "no-such-rope", "key": "rope_parameters.rope_type"}),
    (_UNKNOWN_ACTIVATION, "build_failed", "tf_unknown_value", {"value": "nope", "key": "hidden_act"}),
    (_NOT_A_BOOL, "invalid_config", "tf_field_bool", {"field": "tie_word_embeddings"}),
    (_NOT_AN_INT, "invalid_config", "tf_field_int", {"field": "sliding_window"}),
    (_NOT_A_DTYPE, "invalid_config", "tf_unknown_dtype", {"value": "float99"}),
    (_UNKNOWN_LAYER_TYPE, "invalid_config", "tf_layer_types_unknown",
     {"key": "layer_types", "allowed": "full_attention, sliding_attention, chunked_attention"}),
    (_LAYER_TYPE_COUNT, "invalid_config", "tf_layer_types_count", {"key": "layer_types", "count": "99", "layers": "3"}),
])
def test_what_transformers_refuses_is_said_in_our_words(config, code, cause, data):
    error = _refusal(config)
    assert error.code == code and error.params["detail"].key == cause
    for lang in ("en", "fr"):
        said = plain(text(f"reason.{cause}", lang, **data))
        if "allowed" in data:  # transformers' list goes on; its first names are enough to recognise it
            said = said.split(data["allowed"])[0] + data["allowed"]
        assert said in plain(error.message(lang))
    assert "anglais" not in error.message("fr") and "Class validation" not in error.message("fr")


def test_words_nobody_mapped_are_framed_as_transformers_in_english():
    error = _refusal(_ROPE_WITHOUT_FACTOR)
    assert error.code == "invalid_config"
    french = plain(error.message("fr"))
    sentence, _, detail = french.partition("message de transformers, en anglais")
    assert sentence.startswith("transformers a refusé cette configuration")
    assert "rope_parameters" in detail  # the evidence itself, untranslated
    assert "anglais" not in error.message("en") and "transformers' message, in English" in error.message("en")
    shown = plain(_as_the_page_shows(error, "fr").replace("\\", ""))
    assert "message de transformers, en anglais" in shown and "rope_parameters" in shown


def test_a_class_validator_nobody_mapped_is_named_in_our_sentence_its_words_quoted_after():
    from calculator.models.library_reasons import transformers_reason

    cause = transformers_reason(ValueError("Class validation error for validator 'validate_vision': ValueError: odd"))
    french = plain(cause.shown("fr"))
    assert french.startswith("la configuration échoue au contrôle validate_vision de transformers")
    assert french.index("validate_vision") < french.index("en anglais") < french.index("odd")
    assert "Class validation" not in french and "Class validation" not in cause.shown("en")


def test_a_number_too_long_for_python_is_said_in_our_words():
    from calculator.models.configs import parse_config_text

    with pytest.raises(CalculatorError) as caught:
        parse_config_text(b'{"model_type": "llama", "hidden_size": ' + b"7" * 5000 + b"}")
    french, english = plain(caught.value.message("fr")), caught.value.message("en")
    assert caught.value.code == "config_json_unreadable"
    assert "5 000 chiffres" in french and "4 300" in french and "Exceeds" not in french and "?" not in french
    assert "5,000 digits" in english and "Exceeds" not in english
