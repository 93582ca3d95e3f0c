"""transformers' own words inside a French refusal: kept as evidence, framed as the library's
message in English (issue 23, French review), on real configs transformers refuses."""

from __future__ import annotations

import pytest

import guide.typography  # noqa: F401  (registers French typography, as the guide does)
from calculator.core.errors import CalculatorError
from calculator.models import meta
from guide.format import escape_markdown

_INDIVISIBLE = {"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3}
_UNKNOWN_ROPE = {"model_type": "llama", "rope_scaling": {"rope_type": "no-such-rope"}}


def _refusal(config: dict) -> CalculatorError:
    with pytest.raises(CalculatorError) as caught:
        meta.build_empty_model(meta.make_config(config))
    return caught.value


def _as_the_page_shows(error: CalculatorError, lang: str) -> str:
    params = {key: escape_markdown(value, 400) for key, value in error.shown_params(lang).items()}
    from calculator.core.messages import text
    return text(f"error.{error.code}", lang, **params)


@pytest.mark.parametrize("config, code, words", [
    (_INDIVISIBLE, "invalid_config", "is not a multiple of the number of attention heads"),
    (_UNKNOWN_ROPE, "build_failed", "no-such-rope"),
])
def test_french_frames_the_library_detail_as_english(config, code, words):
    error = _refusal(config)
    assert error.code == code
    french = error.message("fr")
    assert "Message de transformers (en anglais)" in french
    assert words in french  # the evidence itself, untranslated
    assert "en anglais" not in error.message("en") and words in error.message("en")
    shown = _as_the_page_shows(error, "fr").replace("\\", "")
    assert "Message de transformers (en anglais)" in shown and words in shown


def test_the_detail_sits_after_the_french_sentence():
    french = _refusal(_INDIVISIBLE).message("fr")
    sentence, _, detail = french.partition("(en anglais)")
    assert sentence.startswith("transformers a refusé cette configuration.")
    assert "hidden size (100)" in detail
