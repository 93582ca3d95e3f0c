"""The home page's quick check, in both languages (AppTest, no browser)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.apptest import open_own_case
from tests.conftest import ROOT


def home(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "Home.py"), default_timeout=60)
    at.query_params.update(query)
    return at.run()


def test_quick_check_says_whether_it_fits_in_both_languages():
    en = home(lang="en")
    fr = home(lang="fr")
    assert not en.exception and not fr.exception
    assert "loads on the NVIDIA GeForce RTX 4090" in en.success[0].value
    assert "se charge sur" in fr.success[0].value
    assert en.metric[1].value == "14.96 GiB" and fr.metric[1].value == "14,96 Gio"


def test_quick_check_reads_its_inputs_from_the_url():
    at = home(lang="en", qc_model="meta-llama/Llama-3.1-405B", qc_dtype="int4", qc_gpu="NVIDIA H100 SXM")
    assert not at.exception
    assert at.metric[1].value == "188.99 GiB"
    assert "do not fit" in at.error[0].value


def test_changing_an_input_changes_the_figure():
    at = home(lang="en")
    before = at.metric[1].value
    assert "qc_dtype" not in [box.key for box in at.selectbox]  # its own-case panel, closed, draws no input
    open_own_case(at, "qc_model", "qc_dtype", "qc_gpu")
    at.selectbox(key="qc_dtype").set_value("int4").run()
    assert at.metric[1].value != before
