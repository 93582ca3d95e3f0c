"""The chapter's title painted with the page's HTML (guide/page_shell.py, assets/page_shell.html),
in a real browser: there before any of Streamlit's scripts have drawn, in the place and type of
Streamlit's own heading at a desktop, a narrow desktop and a phone width, in the reader's
language, and gone once Streamlit draws its own (in a dark theme, once the app appears)."""

from __future__ import annotations

import pytest

from guide import chapters
from tests.browser import open_url

pytestmark = pytest.mark.browser

# At DOMContentLoaded (Streamlit's scripts are modules: they run after it), where the title is
# and whether Streamlit drew anything yet.
AT_FIRST = """document.addEventListener('DOMContentLoaded', () => {
  const shell = document.querySelector('.guide-shell-title');
  const r = shell && shell.getBoundingClientRect(), style = shell && getComputedStyle(shell);
  window.__atFirst = {text: shell && shell.innerText, box: shell && [r.left, r.top, r.width, r.height],
    type: style && [style.fontFamily, style.fontSize, style.fontWeight, style.lineHeight, style.color],
    streamlit: document.querySelectorAll('[data-testid="stMain"], h1').length, lang: document.documentElement.lang,
    tab: document.title};
});"""
# When Streamlit's app first appears (its frame is drawn before the script's first element),
# read after every observer of that mutation has run, the page's own included (a microtask):
# whether the title is still there, and on top of the app's frame at its centre.
AT_APP = """new MutationObserver(() => {
  if (window.__atApp !== undefined || !document.querySelector('#root > *')) return;
  window.__atApp = null;
  queueMicrotask(() => {
    const title = document.querySelector('.guide-shell-title');
    let onTop = false;
    if (title) {
      const r = title.getBoundingClientRect();
      title.parentElement.style.pointerEvents = 'auto';  // elementFromPoint skips what takes no pointer
      onTop = title.contains(document.elementFromPoint(r.left + 20, r.top + r.height / 2));
      title.parentElement.style.pointerEvents = '';
    }
    window.__atApp = {shells: document.querySelectorAll('.guide-shell').length, onTop,
                      heading: !!document.querySelector("[data-testid='stMainBlockContainer'] h1")};
  });
}).observe(document, {childList: true, subtree: true});"""
STREAMLIT_HEADING = """() => { const h = document.querySelector("[data-testid='stMainBlockContainer'] h1");
  const r = h.getBoundingClientRect(), style = getComputedStyle(h);
  return {text: h.innerText, box: [r.left, r.top, r.width, r.height],
          type: [style.fontFamily, style.fontSize, style.fontWeight, style.lineHeight, style.color],
          shells: document.querySelectorAll('.guide-shell').length}; }"""


@pytest.mark.parametrize("slug, lang, width", [("fine-tuning", "fr", 1280), ("oom", "en", 800), ("", "fr", 390)],
                         ids=["desktop-fr", "narrow-en", "phone-fr"])
def test_the_title_is_painted_first_where_streamlit_draws_it(server, browser, slug, lang, width):
    context = browser.new_context(viewport={"width": width, "height": 900}, locale="en-US")
    page = context.new_page()
    page.add_init_script(AT_FIRST)
    page.add_init_script(AT_APP)
    try:
        open_url(page, f"{server.url}/{slug}?lang={lang}")
        first, streamlit = page.evaluate("window.__atFirst"), page.evaluate(STREAMLIT_HEADING)
        at_app = page.evaluate("window.__atApp")
        # no blank frame between the two: the title stays over the app until Streamlit's heading
        assert at_app["heading"] or (at_app["shells"], at_app["onTop"]) == (1, True), at_app
        title = chapters.by_slug(slug).title(lang)
        assert (first["text"], first["lang"], first["tab"], first["streamlit"]) == (title, lang, title, 0)
        assert streamlit["text"] == title and streamlit["shells"] == 0  # Streamlit's own, and only it
        assert first["box"] == pytest.approx(streamlit["box"], abs=1), (first["box"], streamlit["box"])
        assert first["type"] == streamlit["type"]
    finally:
        context.close()


def test_in_a_dark_theme_the_title_goes_when_the_app_appears(server, browser):
    """Streamlit's page is white until its scripts run: the title is drawn dark on it, and goes
    as the app appears dark."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page = context.new_page()
    page.add_init_script(AT_FIRST)
    page.add_init_script(AT_APP)
    try:
        open_url(page, f"{server.url}/oom?lang=en")
        assert page.evaluate("window.__atFirst.text") == chapters.by_slug("oom").title("en")
        assert page.evaluate("window.__atApp.shells") == 0
        assert page.evaluate("document.querySelectorAll('.guide-shell').length") == 0
    finally:
        context.close()
