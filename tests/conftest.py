"""Shared test set-up: an isolated Hugging Face cache, paths, the local Hub server, and the
guide server, browser and tab of the browser tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
import tempfile

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = Path(__file__).resolve().parent / "configs"

# No test may touch the real Hub or the user's cache: a fresh cache for the whole session,
# and the Hub address points at nothing unless a test starts the local server.
_HF_HOME = tempfile.mkdtemp(prefix="hf-home-")
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: unreachable at once


def pytest_configure(config):
    _scan_installed_components_once()
    _check_written_charts_against_plotly()


def _check_written_charts_against_plotly() -> None:
    """Every chart a test draws is also built by plotly.py, and the spec guide/chart_spec.py
    wrote without it must be plotly.py's to the last key and number type: the page skips
    plotly.py's validation for speed, the tests do not. A difference fails the test drawing it."""
    from guide import chart_spec

    if getattr(chart_spec.written, "checked", False):
        return
    write = chart_spec.written

    def written_and_checked(calls):
        spec = write(calls)  # raises Unwritten as the page's writer does: plotly.py draws it there
        assert _canonical(spec) == _plotly_spec(calls), f"guide/chart_spec.py wrote another figure than plotly.py: {calls}"
        return spec

    written_and_checked.checked = True
    chart_spec.written = written_and_checked


def _plotly_spec(calls) -> str:
    from guide.charts import Drawing, _payload

    drawing = Drawing()
    drawing.calls = list(calls)
    return _canonical(json.loads(_payload(drawing.figure())[0]))


def _canonical(spec: dict) -> str:
    """One text per figure: keys sorted, 1 and 1.0 and true kept apart (JSON round trip)."""
    import plotly.io

    return json.dumps(json.loads(plotly.io.to_json(spec, validate=False)), sort_keys=True)


def _scan_installed_components_once() -> None:
    """Every new AppTest asks Streamlit to find the components of every installed package
    (streamlit/testing/v1/app_test.py: BidiComponentManager.discover_and_register_components,
    which parses each distribution's metadata): 0.4 s a page on this machine, two thirds of
    tests/test_widgets.py's time. The installed packages do not change during a run, so the
    scan runs once; a running guide scans once at start-up too (streamlit/runtime/runtime.py)."""
    from functools import cache

    from streamlit.components.v2 import manifest_scanner

    if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
        manifest_scanner.scan_component_manifests = cache(manifest_scanner.scan_component_manifests)


def load_test_config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.fixture
def hub(monkeypatch):
    """A local HTTP server that answers like the Hugging Face Hub, set as HF_ENDPOINT. The
    model seam's caches are emptied: another test's Hub (same ids) must not answer this one."""
    from calculator.models.seam import clear_caches
    from tests.hub_server import FakeHub

    clear_caches()
    server = FakeHub()
    server.start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", tempfile.mkdtemp(prefix="hf-home-"))
    yield server
    server.stop()


# Browser tests: one plain guide server per test process (its start and first page, which
# imports the engine, are paid once, not per module), one Chromium per test module, a fresh tab
# per test. A module that needs another server (a local Hub, other limits) defines its own
# `server`; one that needs a taller window sets VIEWPORT_HEIGHT.

@pytest.fixture(scope="session")
def server():
    from tests.browser import GuideServer

    guide = GuideServer().wait()
    yield guide
    guide.stop()


@pytest.fixture(scope="module")
def fake_hub():
    """A local Hub holding one small model (someone/tiny-llama), for a module's guide server."""
    from tests.hub_server import FakeHub

    hub = FakeHub()
    hub.start()
    hub.add("someone/tiny-llama", {"config.json": load_test_config("tiny-llama")})
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def server_with_hub(fake_hub, tmp_path_factory):
    """A guide server that reads the Hub from `fake_hub` (a module uses it as its `server`)."""
    from tests.browser import GuideServer

    guide = GuideServer({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": fake_hub.url,
                         "HF_HOME": str(tmp_path_factory.mktemp("hf-home"))}).wait()
    yield guide
    guide.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from tests.browser import launch_browser

    with sync_playwright() as playwright:
        chromium = launch_browser(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    height = getattr(request.module, "VIEWPORT_HEIGHT", 900)
    context = browser.new_context(viewport={"width": 1280, "height": height}, locale="en-US")
    tab = context.new_page()
    yield tab
    context.close()


# The longest test files first (tests/schedule.py), and, when TEST_SECONDS_LOG names a file,
# each test's seconds recorded there by the process that reports (the controller under xdist).

def pytest_collection_modifyitems(config, items):
    from tests.schedule import load_seconds, longest_files_first

    order = longest_files_first([item.nodeid for item in items], load_seconds())
    items[:] = [items[position] for position in order]


def pytest_runtest_logreport(report):
    from tests.schedule import record_line, recording_to

    path = recording_to()
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's reports reach the controller
        with open(path, "a", encoding="utf-8") as log:
            log.write(record_line(report.nodeid, report.when, report.outcome, report.duration))
