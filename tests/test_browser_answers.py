"""The paste-ready answer and the evidence box in a real browser (Debian's chromium): "Copy as
answer" opens beside the share box with the calculator's figures in French typography, and a
pasted log is read and set beside the page's case."""

from __future__ import annotations

import pytest

from tests.browser import open_url, wait_for_widget_text

pytestmark = pytest.mark.browser


def test_copy_as_answer_and_the_evidence_box_in_french(server, page):
    open_url(page, f"{server.url}/serving?lang=fr&model=llama-3.1-8b&gpu=h100"
                   "&ev_text=GPU+KV+cache+size%3A+443%2C328+tokens#serving-memory")
    widget = page.locator(".st-key-widget-serving-memory")
    pool = widget.locator("[data-testid='stMetricValue']").first.inner_text()
    widget.locator("[data-testid='stPopover'] button", has_text="Copier comme réponse").click()
    answer = page.locator("[data-testid='stPopoverBody'] code").inner_text()
    assert pool.replace("\u202f", " ") in answer.replace("\u202f", " ")
    assert "**Hypothèses**" in answer and "\u202f:" in answer
    assert "/serving?lang=fr&model=llama-3.1-8b&gpu=h100" in answer and "#serving-memory" in answer
    wait_for_widget_text(page, "evidence", "vos réglages sont ceux par défaut")
