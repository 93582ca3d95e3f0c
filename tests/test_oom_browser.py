"""The oom chapter in a real browser: a pasted message is read and goes into the URL, and a
shared link with a message reproduces the reading; what was pasted never becomes markup."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.browser import heading_in_view, open_url, wait_until
from tests.test_oom_message import TORCH_2_4

pytestmark = pytest.mark.browser


def test_oom_pasting_a_message_reads_it_and_puts_it_in_the_url(server, page):
    open_url(page, f"{server.url}/oom?lang=en#oom-message")
    box = page.locator(".st-key-widget-oom-message textarea")
    box.fill(TORCH_2_4 + "\n<img src=x onerror=\"window.__pwned=1\"> [link](javascript:alert(1))")
    box.press("Control+Enter")
    widget = page.locator(".st-key-widget-oom-message")
    widget.locator("text=Another process").wait_for(timeout=20_000)
    assert "9.21 GiB" in widget.inner_text()
    wait_until(page, "() => window.location.search.includes('om_text=')")
    assert page.evaluate("() => window.__pwned") is None
    assert widget.locator("img").count() == 0 and widget.locator("a[href^='javascript']").count() == 0


def test_oom_a_shared_message_link_reproduces_the_reading(server, page):
    open_url(page, f"{server.url}/oom?lang=fr&om_text={quote(TORCH_2_4)}#oom-message")
    widget = page.locator(".st-key-widget-oom-message")
    widget.locator("text=Un autre processus").wait_for(timeout=20_000)
    assert "9,21 Gio" in widget.inner_text().replace("\u202f", " ")
    assert heading_in_view(page, "oom-message")
