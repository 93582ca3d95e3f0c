"""The guide in a real browser: links that land, navigation that keeps the language,
calculators that update and links that reproduce them."""

from __future__ import annotations

import re
import time
from urllib.parse import urlparse

import pytest

from guide import chapters
from tests.browser import (RECORD_CSP_VIOLATIONS, assert_no_english_from_streamlit, heading_in_view, open_url,
                           wait_for_page, wait_for_title, wait_for_widget_text, wait_until)

pytestmark = pytest.mark.browser
LANGS = ("en", "fr")


def click_chapter_link(link) -> None:
    """Click a link to another chapter once the page's script has made it a same-tab link
    (Streamlit renders markdown links with target=_blank; a click before then opens a tab)."""
    link.wait_for()
    wait_until(link.page, "(a) => !a.hasAttribute('target')", arg=link.element_handle(), timeout=20_000)
    link.click()


def widget_text(page, name: str) -> str:
    return page.locator(f".st-key-widget-{name}").inner_text()


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
def test_every_contract_deep_link_lands(server, page, chapter):
    """Every section of the contract lands: the first from a fresh load of a pasted link that
    also carries a case value equal to its default (Streamlit drops such a value from the
    address, and the section must stay), the others as a reader follows a link within the
    page. The page is answered with the security headers, runs under its Content Security
    Policy without a violation, declares its language, and in French shows none of
    Streamlit's English strings. Languages in turn; tests/test_browser_case.py opens each
    chapter from a fresh link in the other language."""
    lang = LANGS[chapters.CHAPTERS.index(chapter) % 2]
    page.context.add_init_script(RECORD_CSP_VIOLATIONS)
    name = chapter.case[-1]
    first, *others = chapter.anchors
    with page.expect_response(re.compile(rf"/{chapter.slug}\?")) as answer:
        open_url(page, f"{server.url}/{chapter.slug}?lang={lang}&{name}={chapter.defaults.value(name)}#{first}")
    headers = answer.value.headers
    assert "frame-ancestors 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"]
    for anchor in [first, *others]:
        if anchor != first:
            page.evaluate("(id) => { location.hash = id; }", anchor)
        if not heading_in_view(page, anchor):
            where = page.evaluate("(id) => { const h = document.getElementById(id); return [h ? h.getBoundingClientRect().top : null, window.__guideScrolling, window.__guideScrolledTo, location.href, window.innerHeight]; }", anchor)
            raise AssertionError(f"{chapter.slug}#{anchor} ({lang}) is not in view: {where}")
        assert urlparse(page.url).fragment == anchor, page.url
    assert page.locator("h1").first.inner_text() == chapter.title(lang)
    wait_until(page, "() => window.__guideFrame === true", timeout=10_000)  # the guide's own script ran
    assert page.evaluate("window.__csp") == [], chapter.slug
    assert page.evaluate("document.documentElement.lang") == lang
    if lang == "fr":
        assert_no_english_from_streamlit(page, chapter)


def test_sidebar_links_keep_the_language(server, page):
    open_url(page, f"{server.url}/?lang=fr")
    page.locator("[data-testid='stSidebar'] a[data-testid='stPageLink-NavLink']", has_text="lent").click()
    wait_for_title(page, "Mon modèle est très lent")
    assert re.search(r"/slow-model\?lang=fr", page.url)


def test_language_switch_keeps_page_section_and_values(server, page):
    open_url(page, f"{server.url}/slow-model?lang=en&bs_prompt=4096#data-parallelism")
    assert heading_in_view(page, "data-parallelism")
    page.locator("a[data-guide-lang='fr']").click()
    page.wait_for_url(re.compile(r"lang=fr"))
    wait_for_page(page)
    assert "/slow-model" in page.url and page.url.endswith("#data-parallelism") and "bs_prompt=4096" in page.url
    assert page.locator("h1").first.inner_text() == "Mon modèle est très lent"
    assert heading_in_view(page, "data-parallelism")


def test_a_link_to_another_chapter_lands_on_its_section(server, page):
    open_url(page, f"{server.url}/?lang=fr")
    click_chapter_link(page.get_by_role("link", name="traitez-en plusieurs ensemble"))
    page.wait_for_url(re.compile(r"/slow-model\?lang=fr#batch-size"))
    wait_for_page(page)
    assert heading_in_view(page, "batch-size")


def test_a_link_between_chapters_lands_on_its_section_in_the_same_language(server, page):
    open_url(page, f"{server.url}/fine-tuning?lang=fr#activations")
    click_chapter_link(page.get_by_role("link", name="testez d'abord avec votre batch le plus long"))
    page.wait_for_url(re.compile(r"/oom\?lang=fr#dummy-data-test"))
    wait_for_title(page, chapters.by_slug("oom").title("fr"))
    assert heading_in_view(page, "dummy-data-test")
    assert len(page.context.pages) == 1  # same tab
    assert page.title() == chapters.by_slug("oom").title("fr")  # the browser tab too


def test_a_link_in_a_widget_message_keeps_the_language(server, page):
    open_url(page, f"{server.url}/slow-model?lang=fr&bs_model=meta-llama%2FLlama-3.1-70B&bs_gpu=NVIDIA+T4")
    alert = page.locator(".st-key-widget-batch-size [data-testid='stAlertContentError']")
    click_chapter_link(alert.get_by_role("link", name="quantification"))
    page.wait_for_url(re.compile(r"/quantization\?lang=fr#formats"))
    wait_for_title(page, chapters.by_slug("quantization").title("fr"))
    assert heading_in_view(page, "formats")


def test_a_widget_interaction_updates_the_figure_and_the_url(server, page):
    open_url(page, f"{server.url}/?lang=en")
    wait_for_widget_text(page, "quick-check", "14.96 GiB")
    started = time.perf_counter()
    page.locator(".st-key-case_dtype [data-testid='stSelectbox']").click()  # the page's case
    page.get_by_role("option", name="int4", exact=True).click()
    wait_for_widget_text(page, "quick-check", "3.74 GiB")
    wait_until(page,  # every figure of the widget follows, not only the first
        "(s) => !document.querySelector(s).innerText.includes('14.96 GiB')", arg=".st-key-widget-quick-check")
    assert time.perf_counter() - started < 10
    assert "dtype=int4" in page.url


def test_a_shared_calculator_url_reproduces_the_result(server, browser, page):
    open_url(page, f"{server.url}/slow-model?lang=fr&bs_model=mistralai%2FMistral-7B-v0.1&bs_prompt=4096")
    widget = page.locator(".st-key-widget-batch-size")
    result = widget.locator("[data-testid='stAlertContentSuccess'], [data-testid='stAlertContentError']").inner_text()
    widget.locator("[data-testid='stPopover'] button", has_text="Partager ce résultat").click()  # not the answer
    shared = page.locator("[data-testid='stPopoverBody'] code").inner_text().strip()
    assert "bs_prompt=4096" in shared and shared.endswith("#batch-size") and "lang=fr" in shared
    other = browser.new_context(locale="en-US").new_page()
    open_url(other, shared)
    again = other.locator(".st-key-widget-batch-size [data-testid='stAlertContentSuccess'], "
                          ".st-key-widget-batch-size [data-testid='stAlertContentError']").inner_text()
    assert again == result
    assert heading_in_view(other, "batch-size")
    other.context.close()


def test_an_unknown_page_says_so_in_the_readers_language(server, page):
    open_url(page, f"{server.url}/?lang=fr")  # the first visit of a session
    open_url(page, f"{server.url}/no-such-page%3Cb%3E?lang=fr")
    warning = page.locator("[data-testid='stAlertContentWarning']").first
    warning.wait_for()
    assert "« no-such-page<b> »" in warning.inner_text().replace("\u202f", " ")  # French typography
    # Streamlit's English dialog is closed
    wait_until(page, "() => !document.querySelector(\"[role='dialog']\")", timeout=10_000)
    assert page.locator("b", has_text="»").count() == 0  # the typed HTML stays text


def test_an_unknown_section_says_so_and_shows_the_top(server, page):
    open_url(page, f"{server.url}/slow-model?lang=fr#no-such-section")
    notice = page.locator(".guide-missing-section")
    notice.wait_for(timeout=30_000)
    assert "« no-such-section »" in notice.inner_text().replace("\u202f", " ")
    assert page.locator("h1").first.inner_text() == "Mon modèle est très lent"
    assert page.evaluate("() => document.querySelector('h1').getBoundingClientRect().top") >= 0  # at the top


CHART = ".st-key-widget-{} .guide-chart"


def test_a_chart_is_drawn_on_screen_and_takes_a_new_case_in_place(server, page):
    """A chart (guide/charts.py, assets/chart.js) holds its height before it is drawn, is drawn
    when it comes on screen (with plotly.js served by the guide, under its security policy),
    and after a case change shows the new figure in the same element: nothing is remounted or
    drawn from scratch. French figures keep the French decimal mark."""
    page.add_init_script(RECORD_CSP_VIOLATIONS)
    page.set_viewport_size({"width": 1280, "height": 1600})  # the section's chart on screen with its heading
    open_url(page, f"{server.url}/oom?lang=fr&batch=2#context-length")
    context, below = CHART.format("context-memory"), CHART.format("sort-by-length")
    wait_until(page, "(sel) => document.querySelector(sel)", arg=below)  # Streamlit loads components' code late
    held = page.evaluate("""(sel) => { const host = document.querySelector(sel);
        return [!!host.querySelector('.main-svg'), host.closest('[data-testid="stElementContainer"]').offsetHeight]; }""",
                         below)
    assert held == [False, 380]  # far below: not drawn yet, its place kept
    wait_until(page, "(sel) => document.querySelector(sel + ' .main-svg')", arg=context)
    first = page.evaluate("""(sel) => { const host = document.querySelector(sel); host.__probe = 'kept';
        return [JSON.stringify(host.data.map(t => t.y)), host._fullLayout.separators, host.querySelectorAll('.point, .trace').length]; }""",
                          context)
    assert first[1] == ", " and first[2] > 0
    box = page.locator(".st-key-case_batch input").first
    box.fill("5")  # the page scrolls up to the case bar: the chart is off screen until the reader comes back
    box.press("Enter")
    wait_until(page, "() => location.search.includes('batch=5') && !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    page.locator(context).scroll_into_view_if_needed()
    wait_until(page, "([sel, before]) => JSON.stringify(document.querySelector(sel).data.map(t => t.y)) !== before",
               arg=[context, first[0]])
    assert page.evaluate("(sel) => document.querySelector(sel).__probe", context) == "kept"
    page.locator(below).scroll_into_view_if_needed()
    wait_until(page, "(sel) => document.querySelector(sel + ' .main-svg')", arg=below)
    assert page.evaluate("() => window.__csp") == []


def test_a_chart_whose_library_does_not_load_says_so_in_the_readers_language(server, page):
    from calculator.core.messages import text

    page.route("**/_guide/plotly-*", lambda route: route.abort())
    page.set_viewport_size({"width": 1280, "height": 1600})
    open_url(page, f"{server.url}/oom?lang=fr#context-length")
    wait_until(page, "([sel, said]) => { const h = document.querySelector(sel); return h && h.textContent === said; }",
               arg=[CHART.format("context-memory"), text("frame.chart_unavailable", "fr")])


def test_a_section_link_pins_the_case_and_what_the_reader_set(server, page):
    """"Link to this section" (guide/section_links.py, assets/section_links.js): under a
    heading, it opens the section's address, in the page's language, with the case written out
    in full, the calculator values the address bar holds and the section; copied, it is the
    same text; after a case change it carries the new case; opened, it lands there."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    open_url(page, f"{server.url}/oom?lang=fr&batch=2&dd_batch=48#batch-size")
    heading = page.locator("[data-testid='stHeading']").filter(has=page.locator("#batch-size"))
    toggle = heading.locator(".guide-section-link-toggle")
    toggle.wait_for()
    assert toggle.inner_text().endswith("Lien vers cette section")
    per_heading = page.evaluate("""() => [...document.querySelectorAll(
        "[data-testid='stMainBlockContainer'] [data-testid='stHeading']")].filter(h => h.querySelector('h2[id], h3[id]'))
        .map(h => h.querySelectorAll('.guide-section-link').length)""")
    assert len(per_heading) >= len(chapters.by_slug("oom").anchors) and set(per_heading) == {1}  # each heading, once
    heading.locator("h2").hover()  # Streamlit's own anchor (English, without the case) is not shown beside ours
    assert heading.locator("[data-testid='stHeaderActionElements']").is_hidden()
    toggle.click()
    address = heading.locator(".guide-section-link-address")
    pinned = "lang=fr&model=llama-3.1-8b&gpu=rtx4090&dtype=bfloat16&batch=2&prompt=4096&new_tokens=512"
    assert address.inner_text() == f"{server.url}/oom?{pinned}&workload=generation&dd_batch=48#batch-size"
    heading.locator(".guide-section-link-copy").click()
    wait_until(page, "(el) => el.textContent.endsWith('Copié')", arg=heading.locator(".guide-section-link-copy").element_handle())
    assert page.evaluate("navigator.clipboard.readText()") == address.inner_text()
    page.keyboard.press("Escape")
    assert address.is_hidden() and toggle.get_attribute("aria-expanded") == "false"
    box = page.locator(".st-key-case_batch input").first
    box.fill("5")
    box.press("Enter")
    wait_until(page, "() => location.search.includes('batch=5') && !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    toggle.click()
    # The run's end (status widget gone) can come a frame before the component gets the new case;
    # an open link's address is rewritten when it does (assets/section_links.js attach).
    wait_until(page, "(el) => el.textContent.includes('&batch=5&')", arg=address.element_handle())
    copied = address.inner_text()
    assert "&batch=5&" in copied and copied.endswith("&dd_batch=48#batch-size")
    other = page.context.new_page()
    open_url(other, copied)
    assert heading_in_view(other, "batch-size")
    wait_until(other, "() => { const box = document.querySelector('.st-key-case_batch input'); return box && box.value === '5'; }")
    other.close()


def test_a_chapter_finds_its_server_at_the_first_try(server, page):
    """guide/http.py puts assets/backend_url.html into Streamlit's page: on a chapter's path the
    front end asks the server's root at once, not /<chapter>/_stcore/health (a 404, then a
    pause) first; the page still connects and draws."""
    asked = []
    page.on("request", lambda request: asked.append(urlparse(request.url).path))
    open_url(page, f"{server.url}/oom?lang=fr#batch-size")
    assert page.evaluate("() => window.__streamlit.BACKEND_BASE_URL") == f"{server.url}/"
    assert "/_stcore/health" in asked and not any(path.startswith("/oom/") for path in asked)
    assert heading_in_view(page, "batch-size")


def test_a_calculators_own_case_panel_draws_its_inputs_when_opened(server, page):
    """"Change for this calculator only" (guide/inputs/common.py case_inputs) draws no input
    while closed; a click opens it with its inputs, a value set there counts without drawing
    the panel anew (the field typed in stays the same element), and emptying the field keeps
    the panel open. A link that gives it a value opens it."""
    open_url(page, f"{server.url}/oom?lang=fr#context-length")
    inputs = ".st-key-widget-context-memory [data-testid='stExpander'] input"
    assert page.locator(inputs).count() == 0
    page.locator(".st-key-widget-context-memory [data-testid='stExpander'] summary").first.click()
    wait_until(page, "(sel) => document.querySelectorAll(sel).length === 4", arg=inputs)
    batch = page.locator(f"{inputs.replace(' input', '')} [data-testid='stNumberInput'] input").first
    batch.evaluate("(box) => { box.__probe = 'kept'; }")
    batch.fill("3")
    batch.press("Enter")
    wait_until(page, "() => new URL(location.href).searchParams.get('cm_batch') === '3'")
    wait_for_page(page)
    assert batch.evaluate("(box) => box.__probe") == "kept"
    batch.fill("")
    batch.press("Enter")
    wait_until(page, "() => !new URL(location.href).searchParams.has('cm_batch')")
    wait_for_page(page)
    assert page.locator(inputs).count() == 4 and page.locator(inputs).first.is_visible()
    open_url(page, f"{server.url}/oom?lang=fr&cm_batch=3#context-length")
    wait_until(page, "(sel) => { const box = document.querySelector(sel); return box && box.value === '3'; }",
               arg=f"{inputs.replace(' input', '')} [data-testid='stNumberInput'] input")
    assert page.locator(inputs).first.is_visible()
