"""The chapter's case in a real browser: a link carrying a whole case opens the page
on it and lands on its section, previous and next keep it, a parameter equal to its default
keeps the section, a Hub id typed into a chapter calculator is counted through the local test
Hub, and French pages show none of Streamlit's English strings."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from guide import chapters
from tests.browser import (assert_no_english_from_streamlit, choose_typed, heading_in_view, open_url, wait_for_page,
                           wait_for_title, wait_until)

pytestmark = pytest.mark.browser
LANGS = ("en", "fr")
WITH_CASE = [c for c in chapters.CHAPTERS if c.case]
# One case that differs from every chapter's defaults in each field it can set.
CASE = {"model": "mistral-7b-v0.1", "gpu": "a100-40gb", "dtype": "float16", "batch": "3", "prompt": "700",
        "new_tokens": "90", "sequence": "1536", "method": "qlora", "precision": "bfloat16", "optimizer": "sgd",
        "checkpointing": "none", "users": "12", "context": "2048", "tensor": "2", "workload": "generation",
        "items": "5000"}


@pytest.fixture(scope="module")
def server(server_with_hub):
    return server_with_hub


def case_link(server, chapter, lang: str, anchor: str) -> str:
    query = "&".join(f"{name}={CASE[name]}" for name in chapter.case)
    return f"{server.url}/{chapter.slug}?lang={lang}&{query}#{anchor}"


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlparse(url).query)


def bar_input(page, name: str):
    """A case input (Streamlit's selectbox is a combobox: its value is its input's)."""
    return page.locator(f".st-key-case_{name} input").first


def bar_value(page, name: str) -> str:
    return bar_input(page, name).input_value()


@pytest.mark.parametrize("chapter", WITH_CASE, ids=lambda c: c.slug or "home")
def test_a_case_link_lands_on_its_section_with_the_case(server, page, chapter):
    """Each chapter in the language its contract test (tests/test_browser.py) does not use:
    together they open every chapter from a fresh link in both languages."""
    lang = LANGS[(chapters.CHAPTERS.index(chapter) + 1) % 2]
    anchor = chapter.anchors[-1]
    open_url(page, case_link(server, chapter, lang, anchor))
    assert heading_in_view(page, anchor), f"{chapter.slug}#{anchor} ({lang})"
    assert urlparse(page.url).fragment == anchor
    query = query_of(page.url)
    assert all(query.get(name) == [CASE[name]] for name in chapter.case), page.url
    # (a number field may show its minimum for an instant while a rerun redraws the bar)
    if "gpu" in chapter.case:
        expect(bar_input(page, "gpu")).to_have_value(re.compile("A100 40GB"), timeout=10_000)
    if "model" in chapter.case:
        expect(bar_input(page, "model")).to_have_value(re.compile("Mistral-7B"), timeout=10_000)
    for name in ("batch", "prompt", "new_tokens", "sequence", "dtype", "users", "context", "tensor"):
        if name in chapter.case:
            expect(bar_input(page, name)).to_have_value(CASE[name], timeout=10_000)
    if lang == "fr":
        assert_no_english_from_streamlit(page, chapter)


@pytest.mark.parametrize("lang", LANGS)
def test_previous_and_next_keep_the_case(server, page, lang):
    """Next and previous, clicked, keep the language and the case (that every chapter's footer
    links follow the registry is checked without a browser: tests/test_pages.py)."""
    slug = "slow-model"
    open_url(page, f"{server.url}/{slug}?lang={lang}&model=mistral-7b-v0.1&gpu=a100-40gb&batch=3")
    labels = {"en": ("Next", "Previous"), "fr": ("Suivant", "Précédent")}[lang]
    index = [c.slug for c in chapters.CHAPTERS].index(slug)
    for label, target in ((labels[0], chapters.CHAPTERS[index + 1]), (labels[1], chapters.CHAPTERS[index])):
        page.locator("a[data-testid='stPageLink-NavLink']", has_text=label).click()
        page.wait_for_url(re.compile(rf"/{target.slug}\?"))
        wait_for_page(page)
        wait_for_title(page, target.title(lang))
        query = query_of(page.url)
        assert query["lang"] == [lang] and query["model"] == ["mistral-7b-v0.1"] and query["gpu"] == ["a100-40gb"]
        assert "A100 40GB" in bar_value(page, "gpu") and "Mistral-7B" in bar_value(page, "model")


def test_the_dummy_data_default_batch_keeps_the_section(server, page):
    """The link from the issue: dd_batch=8 is that calculator's own default. (A case value
    equal to its default, in every chapter: tests/test_browser.py, the contract's links.)"""
    open_url(page, f"{server.url}/oom?lang=en&dd_batch=8#batch-size")
    assert heading_in_view(page, "batch-size")
    assert urlparse(page.url).fragment == "batch-size"


def test_a_hub_id_typed_in_a_chapter_calculator_is_counted(server, fake_hub, page):
    """On the oom page, the context calculator's own model: a Hub id typed into its picker is
    read from the local test Hub and goes into the link under the calculator's key."""
    open_url(page, f"{server.url}/oom?lang=en#context-length")
    widget = page.locator(".st-key-widget-context-memory")
    widget.locator("[data-testid='stExpander'] summary").click()
    before = widget.inner_text()
    box = widget.locator("[data-testid='stSelectbox']").first
    choose_typed(page, box, "someone/tiny-llama")
    wait_until(page, "() => location.search.includes('cm_model=someone%2Ftiny-llama')", timeout=90_000)
    wait_for_page(page, timeout=90_000)  # the first model built from a config imports torch
    assert box.locator("input").input_value() == "someone/tiny-llama"
    expect(widget).to_contain_text("MiB", timeout=90_000)  # a 3-layer model's figures, once its run ends
    # (asked after the figures: the run that reads the Hub may start after the page looked idle)
    assert any("/someone/tiny-llama/resolve/main/config.json" in r for r in fake_hub.requests)
    assert widget.inner_text() != before
    assert not widget.locator("[data-testid='stAlertContentError']").count()
    assert not page.locator("[data-testid='stException']").count()


def test_a_hub_id_typed_in_the_case_bar_sets_the_whole_page(server, fake_hub, page):
    open_url(page, f"{server.url}/slow-model?lang=fr")
    choose_typed(page, page.locator(".st-key-case_model [data-testid='stSelectbox']"), "someone/tiny-llama")
    wait_until(page, "() => location.search.includes('model=someone%2Ftiny-llama')", timeout=90_000)
    wait_for_page(page, timeout=90_000)
    assert bar_value(page, "model") == "someone/tiny-llama"
    assert not page.locator(".st-key-case-bar [data-testid='stAlertContentError']").count()
    assert not page.locator("[data-testid='stException']").count()


def test_an_empty_model_search_answers_in_french(server, page):
    open_url(page, f"{server.url}/oom?lang=fr")
    page.locator(".st-key-case_model [data-testid='stSelectbox']").click()
    page.keyboard.type("zzzz-nothing")
    listing = page.locator("[data-testid='stSelectboxVirtualDropdown'], [role='listbox']").first
    listing.wait_for()
    shown = listing.inner_text()
    assert "No results" not in shown and "Add an option" not in shown, shown
