"""The estimator in a real browser (Debian's chromium): the page's case bar searches the catalog
as you type, takes a Hub id read from the local server that plays the Hub and a config.json
uploaded through its file picker; a shared link reopens the same estimate."""

from __future__ import annotations

import re

import pytest

from tests.browser import (choose_typed, choose_typed_until, heading_in_view, open_url, pick_option, upload_to_case_bar,
                           wait_for_page, wait_for_text, wait_until)
from tests.conftest import CONFIGS

pytestmark = pytest.mark.browser
WIDGET = ".st-key-widget-estimator"
BAR = ".st-key-case-bar"
VIEWPORT_HEIGHT = 1000  # the tab of these tests (tests/conftest.py)


@pytest.fixture(scope="module")
def server(server_with_hub):
    return server_with_hub


def exported_table(page) -> str:
    """The markdown export (the table as shown), read from the page: the widget's last expander
    (the first one holds the calculator's own changes to the case)."""
    widget = page.locator(WIDGET)
    for attempt in range(3):  # under load a rerun can redraw the widget under the click: open it again
        wait_for_page(page)
        export = widget.locator("[data-testid='stExpander']").last
        if export.locator("details").get_attribute("open") is None:
            export.locator("summary").click()
        code = export.locator("code")
        try:
            code.wait_for(timeout=15_000)
            return code.inner_text()
        except Exception:
            if attempt == 2:
                raise


def wait_for_widget_text(page, text: str, timeout: float = 30_000, where: str = WIDGET) -> None:
    wait_for_text(page, where, text, timeout)


def model_box(page):
    """The case bar's model box (a catalog search that also takes a Hub id). The page reruns once
    more after it is drawn (the remembered case is read back from the browser), which can redraw
    the box under the keys: the helpers below type again when that happens."""
    return page.locator(f"{BAR} [data-testid='stSelectbox']").first


upload = upload_to_case_bar


def test_a_shared_estimator_url_reopens_the_estimate(server, browser, page):
    open_url(page, f"{server.url}/estimator?lang=fr&es_model=mistralai%2FMixtral-8x7B-v0.1"
                   "&es_dtypes=bfloat16&es_dtypes=int4&es_base=true&es_gpus=NVIDIA+H100+SXM#estimate")
    assert heading_in_view(page, "estimate")
    shown = exported_table(page)
    assert "Mixtral-8x7B" in shown and "int4" in shown and "float32" not in shown
    page.locator(f"{WIDGET} [data-testid='stPopover'] button").first.click()  # Share, then Copy as answer
    shared = page.locator("[data-testid='stPopoverBody'] code").inner_text().strip()
    for part in ("lang=fr", "es_model=mistralai%2FMixtral-8x7B-v0.1", "es_dtypes=bfloat16", "es_dtypes=int4",
                 "es_base=true", "es_gpus=NVIDIA+H100+SXM"):
        assert part in shared, part
    assert shared.endswith("#estimate")
    page.close()  # (a tab left open keeps drawing beside the next one)
    other = browser.new_context(locale="en-US").new_page()
    open_url(other, shared)
    assert heading_in_view(other, "estimate")
    assert exported_table(other) == shown
    other.context.close()


def test_catalog_search_as_you_type(server, page):
    open_url(page, f"{server.url}/estimator?lang=en")
    pick_option(page, model_box(page), "405", "meta-llama/Llama-3.1-405B")
    wait_for_widget_text(page, "405,853,388,800")
    assert "model=llama-3.1-405b" in page.url


def test_a_hub_id_typed_in_the_browser(server, fake_hub, page):
    open_url(page, f"{server.url}/estimator?lang=en")
    choose_typed_until(page, model_box(page), "someone/tiny-llama", "model=someone%2Ftiny-llama")
    wait_for_widget_text(page, "built from its config.json on the Hub", timeout=90_000)  # imports torch once
    assert "model=someone%2Ftiny-llama" in page.url
    assert any("/someone/tiny-llama/resolve/main/config.json" in r for r in fake_hub.requests)
    wait_for_page(page)
    choose_typed(page, model_box(page), "../etc/passwd")
    wait_for_widget_text(page, "is not a valid Hub id", where=BAR)


def test_uploading_a_config_in_the_browser(server, page):
    open_url(page, f"{server.url}/estimator?lang=fr&es_dtypes=float32")
    upload(page, CONFIGS / "tiny-llama.json")
    wait_for_widget_text(page, "Chiffres pour votre fichier", timeout=60_000)  # the first upload imports torch
    exported_table(page)
    wait_until(page,  # the export follows the upload
        "(sel) => [...document.querySelectorAll(sel + ' [data-testid=\"stExpander\"] code')]"
        ".some(c => c.innerText.includes('tiny-llama.json'))", arg=WIDGET, timeout=60_000)
    shown = exported_table(page)
    assert "tiny-llama.json" in shown and re.search(r"\| float32 \| .* Kio \(", shown)
    page.locator(f"{WIDGET} [data-testid='stPopover'] button").first.click()  # Share, then Copy as answer
    assert "ne peut pas voyager dans un lien" in page.locator("[data-testid='stPopoverBody']").last.inner_text()


def test_a_bad_upload_is_refused_in_the_browser(server, page, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2, 3]")
    open_url(page, f"{server.url}/estimator?lang=en")
    upload(page, bad)
    wait_for_widget_text(page, "holds an array in JSON, not an object", where=BAR)
