"""A running guide and a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GuideServer:
    """`streamlit run Home.py` on a free loopback port, for the duration of a test session (or
    another checkout's guide, or another script, for the benchmarks that serve two at once)."""

    def __init__(self, extra_env: dict | None = None, cwd: Path = ROOT, script: str = "Home.py") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **(extra_env or {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(self.port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )

    def wait(self, timeout: float = 60) -> GuideServer:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("streamlit exited: " + self.process.stderr.read().decode()[-2000:])
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise TimeoutError("streamlit did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def wait_for_page(page, timeout: float = 30_000) -> None:
    """Until the chapter's title is drawn and Streamlit has finished running the script."""
    page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=timeout)
    wait_until(page, "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def open_url(page, url: str):
    """Open a URL and wait until the page is drawn and idle."""
    page.goto(url)
    wait_for_page(page)
    return page


def wait_for_widget_text(page, name: str, text: str, timeout: float = 30_000) -> None:
    """Until the widget `name` shows `text` (it may not be drawn yet when this starts)."""
    wait_for_text(page, f".st-key-widget-{name}", text, timeout)


CASE_BAR = ".st-key-case-bar"
POLL_MS = 100  # Playwright polls a condition on every animation frame by default: 60 layouts a second


def wait_until(page, expression: str, arg=None, timeout: float = 30_000):
    """page.wait_for_function, checking every POLL_MS: the conditions read innerText or a
    heading's position, which lay out the whole page, and a chapter is large."""
    return page.wait_for_function(expression, arg=arg, timeout=timeout, polling=POLL_MS)
# Streamlit's own English strings a French page must not show (assets/frame.html relabels them).
STREAMLIT_ENGLISH = ("Drag and drop", "Browse files", "Upload", "per file", "No results", "Choose an option",
                     "Press Enter to apply", "Add an option")
# An init script that records every Content-Security-Policy violation of the page.
RECORD_CSP_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def assert_no_english_from_streamlit(page, chapter) -> None:
    """A French page shows none of Streamlit's English strings (the upload popover opened)."""
    if chapter.case and "model" in chapter.case:
        page.locator(f"{CASE_BAR} [data-testid='stPopover'] button").first.click()
        page.keyboard.press("Escape")
    text = page.locator("[data-testid='stMain']").inner_text()
    found = [word for word in STREAMLIT_ENGLISH if word in text]
    assert not found, f"{chapter.slug or 'home'}: {found}"


def upload_to_case_bar(page, path) -> None:
    """Upload a config.json through the case bar (its popover holds the uploader); a second
    upload replaces the first."""
    body = page.locator("[data-testid='stPopoverBody'] [data-testid='stFileUploaderDropzoneInput']")
    if not body.count():
        page.locator(f"{CASE_BAR} [data-testid='stPopover'] button").first.click()
    body.set_input_files(str(path))


def type_into(page, box, text: str) -> None:
    """Type `text` into a select box's search field. Under load a rerun can redraw the box
    between the click and the keys: type again until the field holds it."""
    for _ in range(3):
        box.click()
        page.keyboard.press("Control+A")
        page.keyboard.type(text)
        try:
            wait_until(page, "([e, t]) => !!e && e.value === t", arg=[box.locator("input").element_handle(), text],
                       timeout=5_000)
            return
        except Exception:
            continue


def choose_typed(page, box, text: str) -> None:
    """Type `text` into a select box that takes new options, and press Enter."""
    type_into(page, box, text)
    page.keyboard.press("Enter")


def choose_typed_until(page, box, text: str, in_url: str, tries: int = 3) -> None:
    """Choose `text` in a select box that takes new options until the address bar shows
    `in_url` (the page took it): a rerun that redraws the box can swallow the Enter too."""
    for attempt in range(tries):
        wait_for_page(page)
        choose_typed(page, box, text)
        try:
            wait_until(page, "(t) => window.location.href.includes(t)", arg=in_url, timeout=30_000)
            return
        except Exception:
            if attempt == tries - 1:
                raise


def pick_option(page, box, typed: str, option: str, tries: int = 3) -> None:
    """Search the select box for `typed` and click the option named `option`, typing again if a
    rerun closed the list under the keys."""
    for attempt in range(tries):
        wait_for_page(page)
        type_into(page, box, typed)
        try:
            page.get_by_role("option", name=option).click(timeout=10_000)
            return
        except Exception:
            if attempt == tries - 1:
                raise


def wait_for_text(page, selector: str, text: str, timeout: float = 30_000) -> None:
    """Until the element `selector` shows `text` (it may not be drawn yet when this starts)."""
    wait_until(page, "([s, t]) => { const e = document.querySelector(s); return !!e && e.innerText.includes(t); }",
                           arg=[selector, text], timeout=timeout)


def heading_in_view(page, anchor: str, timeout: float = 20_000) -> bool:
    """True once the heading with this id sits in the top part of the viewport."""
    try:
        wait_until(page, """(id) => { const h = document.getElementById(id);
                         if (!h) return false;
                         const top = h.getBoundingClientRect().top;
                         return top >= 0 && top < window.innerHeight / 2; }""",
            arg=anchor, timeout=timeout)
        return True
    except Exception:
        return False


def wait_for_title(page, title: str, timeout: float = 30_000) -> None:
    wait_until(page, "(t) => { const h = document.querySelector(\"[data-testid='stMainBlockContainer'] h1\"); return !!h && h.innerText === t; }",
        arg=title, timeout=timeout)
