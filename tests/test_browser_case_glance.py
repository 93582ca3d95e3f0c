"""The case at a glance and remembered, in a real browser: the case bar's
summary shows the whole model, precision, card and its usable memory at 1280 px and on a
phone, chapter titles read whole in the sidebar, in both languages (screenshots in bench/out/
to look at); the model and GPU a reader chose come back in a fresh tab, a link's own values
win over them, and "Forget my case" clears them."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from calculator.core.gpus import gpu
from calculator.core.units import format_bytes
from guide import chapters
from tests.browser import choose_typed, open_url, wait_for_page, wait_until
from tests.conftest import ROOT

pytestmark = pytest.mark.browser
OUT = ROOT / "bench" / "out"
LONG_CASE = {"model": "llama-3.1-8b", "gpu": "rtx4090", "dtype": "bfloat16"}
LONG_NAMES = ("meta-llama/Llama-3.1-8B", "NVIDIA GeForce RTX 4090", "bfloat16")  # cut by the inputs at 1280 px
PHONE = {"width": 390, "height": 844}
CLIPPED = """(selector) => [...document.querySelectorAll(selector)].filter(e =>
    e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > window.innerWidth + 1)
    .map(e => e.innerText)"""


def _case_url(server, lang: str) -> str:
    query = "&".join(f"{name}={value}" for name, value in LONG_CASE.items())
    return f"{server.url}/oom?lang={lang}&{query}"


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("width", [1280, PHONE["width"]], ids=["desktop", "phone"])
def test_the_case_reads_whole(server, browser, lang, width):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 500 else PHONE["height"]},
                                  locale="en-US")
    page = context.new_page()
    try:
        open_url(page, _case_url(server, lang))
        summary = page.locator(".st-key-case-summary")
        text = summary.inner_text()
        card = gpu("rtx4090")
        for name in (*LONG_NAMES, format_bytes(card.usable_bytes, lang), format_bytes(card.total_bytes, lang)):
            assert name in text.replace("\u202f", " ").replace("\u00a0", " "), (name, text)
        assert summary.is_visible()
        assert page.evaluate(CLIPPED, ".st-key-case-summary p") == []
        if width > 500:  # the sidebar is open on a desktop: every chapter title whole
            links = "[data-testid='stSidebar'] [data-testid='stPageLink-NavLink'] p"
            # the sidebar may arrive after the summary: wait for every chapter's link before reading
            page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length >= n",
                                   arg=[links, len(chapters.CHAPTERS)], timeout=30_000)
            assert page.evaluate(CLIPPED, links) == []
            shown = [t.replace("\u202f", " ").replace("\u00a0", " ") for t in page.locator(links).all_inner_texts()]
            for chapter in chapters.CHAPTERS:
                title = chapter.title(lang)
                assert any(title.replace("\u202f", " ").replace("\u00a0", " ").replace(" ?", "?") in s.replace(" ?", "?")
                           for s in shown), (title, shown)
        summary.scroll_into_view_if_needed()
        wait_for_page(page)  # no input left as a placeholder in the picture
        OUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUT / f"case-glance-{lang}-{width}.png"))
    finally:
        context.close()


# Each case field's label word drawn on two lines ("Metho / d"), and each field's box narrower
# than a short value reads in ("LoRA" shown as "Lc").
CUT_FIELDS = """(bar) => {
  const broken = [];
  for (const label of bar.querySelectorAll('[data-testid="stWidgetLabel"] p')) {
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        if (new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1) broken.push(word[0]);
      }
    }
  }
  const narrow = [...bar.querySelectorAll('[data-testid="stSelectbox"], [data-testid="stNumberInput"]')]
    .filter(e => e.getBoundingClientRect().width < MIN_WIDTH).map(e => e.innerText.split("\\n")[0]);
  return {broken, narrow};
}"""
MIN_FIELD_PX = 150


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_every_case_field_reads_at_1280_px(server, browser, lang):
    """Eight fields on one row (fine-tuning) cut labels mid-word and values to two letters: the
    bar puts the model, card and precision on a row and the other fields at most four a row."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    try:
        for chapter in (c for c in chapters.CHAPTERS if c.case):
            open_url(page, f"{server.url}/{chapter.slug}?lang={lang}")
            fields = ".st-key-case-bar [data-testid='stSelectbox'], .st-key-case-bar [data-testid='stNumberInput']"
            page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length >= n",
                                   arg=[fields, len(chapter.case)], timeout=30_000)  # drawn, not placeholders
            bar = page.locator(".st-key-case-bar").element_handle()
            cut = page.evaluate(CUT_FIELDS.replace("MIN_WIDTH", str(MIN_FIELD_PX)), bar)
            assert cut == {"broken": [], "narrow": []}, (chapter.slug or "home", cut)
    finally:
        context.close()


def _stored(page) -> dict:
    return json.loads(page.evaluate("localStorage.getItem('guide.case') || '{}'"))


def _query(page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def _wait_for_query(page, name: str, value: str | None) -> None:
    wait_until(page, "([n, v]) => new URLSearchParams(location.search).get(n) === v", arg=[name, value])


def test_the_case_is_remembered_in_the_browser_and_forgotten(server, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    try:
        open_url(page, f"{server.url}/oom?lang=en")
        choose_typed(page, page.locator(".st-key-case_gpu [data-testid='stSelectbox']"), "a100-80gb")
        _wait_for_query(page, "gpu", "a100-80gb")
        wait_until(page, "() => (localStorage.getItem('guide.case') || '').includes('a100-80gb')")
        assert _stored(page) == {"gpu": "a100-80gb"}  # the model stayed the chapter's: nothing to keep
        page.close()  # (a tab left open keeps drawing its charts beside the next one)

        # A fresh tab on another chapter, no case in its link: the card comes back.
        fresh = context.new_page()
        open_url(fresh, f"{server.url}/serving?lang=fr")
        _wait_for_query(fresh, "gpu", "a100-80gb")
        wait_until(fresh, "() => document.querySelector('.st-key-case-summary').innerText.includes('A100')")
        fresh.close()

        # A link that names a case opens on exactly its own values.
        linked = context.new_page()
        open_url(linked, f"{server.url}/oom?lang=en&gpu=rtx4090")
        linked.wait_for_timeout(1500)  # time for the browser's answer and the rerun it brings
        assert _query(linked).get("gpu") == ["rtx4090"]
        assert "RTX 4090" in linked.locator(".st-key-case-summary").inner_text()

        # Forget: the browser holds nothing, and a fresh tab opens on the chapter's defaults.
        linked.get_by_role("button", name="Forget my case").click()
        wait_until(linked, "() => localStorage.getItem('guide.case') === null")
        linked.close()
        last = context.new_page()
        open_url(last, f"{server.url}/oom?lang=en")
        last.wait_for_timeout(1500)
        assert "gpu" not in _query(last)
        assert "RTX 4090" in last.locator(".st-key-case-summary").inner_text()  # the chapter's default card
    finally:
        context.close()


def test_a_tab_without_storage_still_opens(server, browser):
    """A browser that refuses localStorage (privacy settings) reads the page as before."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script("Object.defineProperty(window, 'localStorage', {get() { throw new Error('off'); }})")
    try:
        page = context.new_page()
        open_url(page, f"{server.url}/oom?lang=en")
        assert "RTX 4090" in page.locator(".st-key-case-summary").inner_text()
    finally:
        context.close()


@pytest.mark.parametrize("stored", ['{"model": ' + "[" * 1_500 + "]" * 1_500 + "}", '{"gpu": 4090}', "{not json"],
                         ids=["nested", "number", "not-json"])
def test_a_tampered_remembered_case_is_dropped_never_an_exception(server, browser, stored):
    """Anyone can write into localStorage: what is not a case is cleared by the page's script,
    the page never shows an exception, and it opens on the chapter's own case. (The notice the
    server then draws is tested on its own, tests/test_remembered.py: under load the rerun that
    carries it was once seen to stop half drawn, a rerun started by the component mid-run.)"""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="fr-FR")
    page = context.new_page()
    try:
        open_url(page, f"{server.url}/oom?lang=fr")
        page.evaluate("(value) => localStorage.setItem('guide.case', value)", stored)
        page.reload()
        wait_for_page(page)
        wait_until(page, "() => localStorage.getItem('guide.case') === null")
        assert not page.locator("[data-testid='stException']").count()
        page.reload()
        wait_for_page(page)
        assert not page.locator("[data-testid='stException']").count()
        assert "RTX 4090" in page.locator(".st-key-case-summary").inner_text()
    finally:
        context.close()
