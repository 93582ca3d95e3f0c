"""The memory-estimate chapter: the rule-of-thumb widget against the formula worked by hand,
the exact-count widget against the catalog, and every figure of the `units` section against
the engine, the GPU catalog and accelerate's own code."""

from __future__ import annotations

import pytest
import streamlit as st

from calculator.models import catalog
from calculator.core.gpus import gpus
from calculator.core.units import format_bytes, format_count, format_number
from guide.chapters import by_slug
from tests.apptest import open_page

CHAPTER = by_slug("memory-estimate")


@pytest.fixture(autouse=True)
def fresh_page_caches():
    st.cache_data.clear()
    yield


def text_of(lang: str) -> str:
    return CHAPTER.content_path(lang).read_text(encoding="utf-8")


def rule_widget(lang: str, **query):
    at = open_page("memory-estimate", lang, **query)
    assert not at.exception, [e.value for e in at.exception]
    formula = next(m.value for m in at.markdown if "× 10⁹" in m.value)
    return _numbers(formula), [m.value for m in at.metric]  # French typography: narrow spaces


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_rule_of_thumb_works_the_units_example(lang):
    # 15.5 billion parameters x 2 bytes = 31 x 10^9 bytes; x 1.1 = 34.1 x 10^9 bytes.
    formula, metrics = rule_widget(lang, rt_params="15.5", rt_dtype="bfloat16")
    gb, gib = ("GB", "GiB") if lang == "en" else ("Go", "Gio")
    comma = "." if lang == "en" else ","
    assert f"15{comma}5 × 10⁹" in formula
    assert f"**31{comma}00 {gb}** (28{comma}87 {gib})" in formula  # 31e9 / 2^30 = 28.871
    assert f"× 1{comma}1 = **34{comma}10 {gb}**" in formula
    assert f"**31{comma}76 {gib}**" in formula  # 34.1e9 / 2^30 = 31.758
    assert metrics == [f"31{comma}00 {gb}", f"34{comma}10 {gb}", f"31{comma}76 {gib}"]


def test_rule_of_thumb_in_int4():
    # 70 x 10^9 x 0.5 byte = 35 GB; x 1.1 = 38.5 GB = 35.86 GiB.
    formula, metrics = rule_widget("en", rt_params="70", rt_dtype="int4")
    assert "70 × 10⁹ parameters × 0.5 bytes = **35.00 GB**" in formula
    assert metrics == ["35.00 GB", "38.50 GB", "35.86 GiB"]


def test_exact_count_shows_the_catalog_table_and_opens_the_estimator():
    at = open_page("memory-estimate", "en", ec_model="Qwen/Qwen3-30B-A3B")
    assert not at.exception
    summary = catalog.stored_summary("qwen3-30b-a3b")
    frame = at.dataframe[0].value
    assert list(frame.iloc[:, 0]) == ["float32", "bfloat16", "int8", "int4"]
    assert frame.iloc[1, 2] == format_bytes(summary.total_bytes_at("bfloat16"))
    line = next(m.value for m in at.markdown if "parameters" in m.value and "active" in m.value)
    assert format_count(summary.parameters) in line and format_count(summary.active_parameters) in line
    link = next(m.value for m in at.markdown if "full estimator" in m.value)
    # the estimator opens on the same model, as the page's case (links carry the case)
    assert "(estimator?lang=en&model=qwen3-30b-a3b#estimate)" in link


def test_exact_count_upload_has_no_estimator_link_and_says_why_in_the_share_box():
    at = open_page("memory-estimate", "fr")
    at.get("file_uploader")[0].set_value(("config.json", catalog.find("gpt2").config_path.read_bytes(), "application/json"))
    at.run()
    assert not at.exception
    assert not any("estimateur complet" in m.value for m in at.markdown)
    assert any("ne peut pas voyager dans un lien" in w.value for w in at.warning)


def _numbers(text: str) -> str:
    return text.replace("\u202f", " ").replace("\u00a0", " ")


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_units_section_figures_come_from_the_engine_and_the_gpu_catalog(lang):
    text = _numbers(text_of(lang))
    n = lambda value: _numbers(format_count(value, lang))  # noqa: E731
    size = lambda value, system="binary": _numbers(format_bytes(value, lang, system=system))  # noqa: E731
    # 15.5B in bfloat16: 31 GB is about 28.9 GiB.
    assert _numbers(format_number(15.5e9 * 2 / 2**30, 1, lang)) == ("28.9" if lang == "en" else "28,9")
    assert ("about 28.9 GiB" if lang == "en" else "environ 28,9 Gio") in text
    # The cards, as nvidia-smi reports them (the GPU catalog).
    for key in ("h100", "rtx4090"):
        card = gpus()[key]
        assert f"{n(card.memory_mib)} MiB" in text or f"{n(card.memory_mib)} Mio" in text
        assert size(card.memory_bytes) in text
    # bert-base-cased, base class, float32: accelerate's figure in its real units.
    bert = catalog.stored_summary("bert-base-cased", "base").total_bytes_at("float32")
    assert bert == 433_249_280
    assert n(bert) in text and size(bert) in text and size(bert, "decimal") in text
    # Llama-3-8B: the base model accelerate counts and the checkpoint's own class.
    base = catalog.stored_summary("llama-3-8b", "base")
    auto = catalog.stored_summary("llama-3-8b", "auto")
    assert (base.parameters, auto.parameters) == (7_504_924_672, 8_030_261_248)
    assert n(base.parameters) in text and n(auto.parameters) in text
    assert size(auto.total_bytes_at("float32")) in text and size(auto.total_bytes_at("float32"), "decimal") in text
    assert auto.parameters - base.parameters == 128_256 * 4_096
    assert f"{n(128_256)} × {n(4_096)}" in text


def test_accelerate_prints_these_figures_with_gb_labels():
    """accelerate's own code, on the same configs, gives the figures the chapter quotes."""
    import json

    import torch
    import transformers
    from accelerate import init_empty_weights
    from accelerate.utils import calculate_maximum_sizes, convert_bytes

    def accelerate_total(key: str) -> str:
        config = transformers.AutoConfig.for_model(**json.loads(catalog.find(key).config_path.read_text()))
        with init_empty_weights():
            model = transformers.AutoModel.from_config(config, dtype=torch.float32)
        return convert_bytes(calculate_maximum_sizes(model)[0])

    text = text_of("en")
    assert accelerate_total("bert-base-cased") == "413.18 MB" and "**413.18 MB**" in text
    assert accelerate_total("llama-3-8b") == "27.96 GB" and '27.96 "GB"' in text


def test_inference_overhead_names_its_source_in_both_languages():
    for lang in ("en", "fr"):
        text = text_of(lang)
        assert "Transformer Math 101" in text and "EleutherAI" in text and "20" in text
        assert "(slow-model#batch-size)" in text
