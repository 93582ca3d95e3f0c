"""One upload limit everywhere (the server's maxUploadSize, the browser's refusal, the help
texts, the engine's check), said in the reader's language; French messages French, with
grouped numbers."""

from __future__ import annotations

from pathlib import Path
import re
import tomllib

import pytest

from calculator.models.configs import check_config
from calculator.core.errors import CalculatorError, Grouped
from calculator.core.messages import text
from calculator.models.seam import MAX_UPLOAD_BYTES, resolve_upload
from guide.render import streamlit_translations

ROOT = Path(__file__).resolve().parent.parent


def test_the_engine_refuses_what_the_server_refuses():
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert MAX_UPLOAD_BYTES == server["maxUploadSize"] * 1_000_000  # Streamlit's MB: 10^6 bytes
    refused = b"{" + b" " * (MAX_UPLOAD_BYTES - 1) + b"}"  # one byte over
    with pytest.raises(CalculatorError) as info:
        resolve_upload(refused, "config.json")
    assert info.value.code == "upload_too_large"
    assert "1\u202f000\u202f000" in info.value.message("fr") and "1,000,000" in info.value.message("en")


@pytest.mark.parametrize("key", ["case.upload_help", "model_source.upload_help"])
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_help_says_the_same_number(key, lang):
    assert Grouped(MAX_UPLOAD_BYTES).shown(lang) in text(key, lang)
    assert "MiB" not in text(key, lang) and "Mio" not in text(key, lang)


def test_streamlits_refusal_of_a_large_file_is_french_on_french_pages():
    english = "File must be 1.0MB or smaller."  # Streamlit's front end, for maxUploadSize = 1
    french = english
    for pattern, replacement in streamlit_translations("fr"):
        if re.match(pattern, english):
            french = re.sub(pattern, replacement.replace("$1", r"\1"), english)
            break
    assert french != english and "1\u202f000\u202f000" in french and "octets" in french
    assert streamlit_translations("en") == []


@pytest.mark.parametrize("config,numbers", [
    ({"model_type": "llama", "num_hidden_layers": [[300], [300]] * 2}, ["1\u202f200", "1\u202f024"]),
    ({"model_type": "llama", "num_hidden_layers": [1] * 100_000}, ["100\u202f000", "1\u202f024"]),
    ({"model_type": "llama", "max_position_embeddings": 10**9}, ["1\u202f000\u202f000\u202f000", "16\u202f777\u202f216"]),
    ({"model_type": "bert", "id2label": {str(i): "x" for i in range(200_000)}}, ["200\u202f000", "100\u202f000"]),
])
def test_french_config_refusals_are_french_with_grouped_numbers(config, numbers):
    with pytest.raises(CalculatorError) as info:
        check_config(config)
    french = info.value.message("fr")
    assert all(n in french for n in numbers), french
    assert not re.search(r"\b(layers|entries|in all|sizes)\b", french), french
