"""Browser timings on this machine: time to first content of each chapter (from the start of
the navigation, as the browser's own clock measures it, until the chapter's title is in the
page) and from a changed input to the updated figure. Targets: under 1.5 s and under 300 ms.
Run: python -m bench browser"""

from __future__ import annotations

import statistics
import time

from guide import chapters
from tests.browser import GuideServer, launch_browser, wait_for_page

REPEAT = 5
# Records, on the page's own clock (0 = navigation start), when the chapter title appears.
WATCH_TITLE = """
new MutationObserver(function (changes, observer) {
  if (document.querySelector("[data-testid='stMainBlockContainer'] h1")) {
    window.__firstContent = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""


def first_content(browser, url: str, context=None) -> float:
    """A new tab opening the URL. Without a context: a first visit (empty browser cache);
    with one: a returning reader whose browser has Streamlit's scripts cached."""
    own = context is None
    context = context or browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.add_init_script(WATCH_TITLE)
    page.goto(url)
    page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=30_000)
    elapsed = page.evaluate("() => window.__firstContent") / 1000
    page.close()
    if own:
        context.close()
    return elapsed


def input_to_figure(browser, url: str, widget: str, label: str, values: list[str]) -> list[float]:
    """Type new values into a number input; time until the widget's content changes."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url)
    wait_for_page(page)
    box = page.locator(f".st-key-widget-{widget} [data-testid='stNumberInput']", has_text=label).locator("input")
    times = []
    for value in values:
        before = page.locator(f".st-key-widget-{widget}").inner_text()
        box.fill(value)
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(
            "([w, b]) => document.querySelector('.st-key-widget-' + w).innerText !== b", arg=[widget, before],
            polling="raf")
        times.append(time.perf_counter() - start)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    context.close()
    return times


def main() -> None:
    from playwright.sync_api import sync_playwright

    server = GuideServer().wait()
    try:
        with sync_playwright() as playwright:
            browser = launch_browser(playwright)
            first_content(browser, server.url + "/?lang=en")  # warm the server's imports
            returning = browser.new_context(viewport={"width": 1280, "height": 900})
            print("| page | first visit (empty cache) | returning reader (cached scripts) |\n|---|---|---|")
            for chapter in chapters.CHAPTERS:
                for lang in ("en", "fr"):
                    url = f"{server.url}/{chapter.slug}?lang={lang}"
                    cold = statistics.median(first_content(browser, url) for _ in range(REPEAT))
                    warm = statistics.median(first_content(browser, url, returning) for _ in range(REPEAT))
                    print(f"| /{chapter.slug}?lang={lang} | {cold * 1000:.0f} ms | {warm * 1000:.0f} ms |")
            returning.close()
            updates = input_to_figure(browser, server.url + "/slow-model?lang=en", "batch-size", "Prompt length",
                                      ["2048", "512", "4096", "1024", "3000", "700", "1500", "900", "2500", "600"])
            updates.sort()
            print(f"\n| input change to updated figure (slow-model batch-size, {len(updates)} changes) | "
                  f"median {statistics.median(updates) * 1000:.0f} ms, 90th percentile "
                  f"{updates[int(0.9 * (len(updates) - 1))] * 1000:.0f} ms |")
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
