"""Hostile input against the running guide, in a real browser: a config too large
to build while another reader keeps working, links with numbers no field can hold, unknown
paths of any depth, the headers every answer carries, and the page's language."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from bench.processes import tree_bytes
from calculator.models import catalog
from guide import chapters
from guide.markdown import Heading, parse
from tests.browser import (CASE_BAR, GuideServer, heading_in_view, open_url, upload_to_case_bar, wait_for_text,
                           wait_for_widget_text, wait_until)

pytestmark = pytest.mark.browser
BUILD_SECONDS = 5


@pytest.fixture(scope="module")
def server():
    guide = GuideServer({"CALCULATOR_BUILD_SECONDS": str(BUILD_SECONDS)}).wait()
    yield guide
    guide.stop()


def last_heading(slug: str, lang: str) -> str:
    chapter = chapters.by_slug(slug)
    return [b for b in parse(chapter.content_path(lang).read_text()) if isinstance(b, Heading) and b.level <= 2][-1].anchor




def test_a_config_too_large_to_build_while_another_reader_works(server, browser, tmp_path):
    """The estimator builds an uploaded config in a worker, within a time limit: past it, the
    reader is told in their language; meanwhile another reader's calculator answers at once,
    and the server's memory stays far below a gigabyte."""
    from tests.test_build_worker import many_experts

    deep = tmp_path / "experts.json"
    deep.write_text(json.dumps(many_experts()))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({**catalog.config("bert-base-cased"), "architectures": ["BertForSequenceClassification"],
                                  "num_labels": 100_000_000}))
    peaks = {"own": 0, "tree": 0}
    before_own, before_tree = tree_bytes(server.process.pid)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            own, tree = tree_bytes(server.process.pid)
            peaks["own"], peaks["tree"] = max(peaks["own"], own), max(peaks["tree"], tree)
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    first = browser.new_context(viewport={"width": 1280, "height": 1000})
    second = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        uploader, reader = first.new_page(), second.new_page()
        open_url(uploader, f"{server.url}/estimator?lang=fr")
        open_url(reader, f"{server.url}/slow-model?lang=en")
        box = reader.locator(".st-key-case_prompt input")  # the page's case: every calculator follows it
        box.wait_for()
        # A config every static check allows, whose build takes longer than the limit.
        upload_to_case_bar(uploader, deep)
        started = time.perf_counter()
        time.sleep(0.5)
        box.fill("3000")
        box.press("Enter")
        wait_for_widget_text(reader, "batch-size", "3,256")  # 3,000 + 256 new tokens
        answered = time.perf_counter() - started
        wait_for_text(uploader, CASE_BAR, "trop grande pour être construite", timeout=120_000)
        refused = time.perf_counter() - started
        assert answered < refused and answered < BUILD_SECONDS, (answered, refused)
        # The probe's 10^8-label config: refused before anything is built.
        start = time.perf_counter()
        upload_to_case_bar(uploader, labels)
        wait_for_text(uploader, CASE_BAR, "num_labels", timeout=20_000)
        assert time.perf_counter() - start < 20
        assert uploader.locator("[data-testid='stException']").count() == 0
    finally:
        stop.set()
        sampler.join()
        first.close()
        second.close()
    assert peaks["own"] < 2**30, peaks
    assert peaks["tree"] - before_tree < 2**30, (before_tree, peaks)


HOSTILE_LINKS = [
    ("oom", "fr", "cm_batch", "inf", "batch-size"),
    ("fine-tuning", "fr", "tm_batch", "1e309", "training-memory"),
    ("cpu-offloading", "en", "om_gpu_gib", "inf", "device-map"),
    ("slow-model", "en", "bs_prompt", "9" * 400, "batch-size"),
]


@pytest.mark.parametrize("slug,lang,key,value,anchor", HOSTILE_LINKS,
                         ids=[f"{s}-{lang}-{k}-{v[:8]}" for s, lang, k, v, _ in HOSTILE_LINKS])
def test_a_link_with_a_number_no_field_holds_lands_on_its_section(server, page, slug, lang, key, value, anchor):
    open_url(page, f"{server.url}/{slug}?lang={lang}&{key}={value}#{anchor}")
    assert heading_in_view(page, anchor), page.url
    wait_until(page, "(k) => !new URL(location.href).searchParams.has(k)", arg=key, timeout=10_000)
    assert page.url.endswith(f"#{anchor}") and f"lang={lang}" in page.url
    notice = {"en": "which this calculator cannot use", "fr": "que ce calculateur ne peut pas utiliser"}[lang]
    wait_until(page, "(t) => document.querySelector(\"[data-testid='stMain']\").innerText.includes(t)",
                           arg=notice, timeout=60_000)  # drawn once the widget has run
    assert page.locator("[data-testid='stException']").count() == 0
    page.locator(f"[id='{last_heading(slug, lang)}']").wait_for(state="attached", timeout=60_000)  # drawn to its end
    assert page.evaluate("document.documentElement.lang") == lang


@pytest.mark.parametrize("path,lang,shown", [("estimator/extra", "fr", "«\u202festimator/extra\u202f»"),
                                              ("a/b/c", "en", "'a/b/c'"),
                                              ("slow-model/batch-size/x", "fr", "«\u202fslow-model/batch-size/x\u202f»")])
def test_unknown_paths_of_any_depth_show_the_home_page_and_say_so(server, page, path, lang, shown):
    open_url(page, f"{server.url}/?lang={lang}")  # the first visit of a session
    open_url(page, f"{server.url}/{path}?lang={lang}")
    warning = page.locator("[data-testid='stAlertContentWarning']").first
    warning.wait_for()
    assert shown in warning.inner_text()
    assert page.locator("h1").first.inner_text() == chapters.HOME.title(lang)
    # the frame sets <html lang> on its first tick: wait for it as the language-switch test does
    wait_until(page, "(l) => document.documentElement.lang === l", arg=lang, timeout=10_000)
    assert page.evaluate("document.documentElement.lang") == lang


def test_french_and_english_pages_declare_their_language(server, page):
    open_url(page, f"{server.url}/oom?lang=fr")
    # assets/frame.html sets it on its first tick after the page's data arrives, as after the switch below
    wait_until(page, "() => document.documentElement.lang === 'fr'", timeout=20_000)
    page.locator("a[data-guide-lang='en']").first.click()  # the language switch
    wait_until(page, "() => document.documentElement.lang === 'en'", timeout=20_000)


def test_the_metrics_are_not_served_through_a_proxy(server):
    with urllib.request.urlopen(f"{server.url}/_stcore/metrics", timeout=10) as direct:
        assert direct.status == 200
    proxied = urllib.request.Request(f"{server.url}/_stcore/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(proxied, timeout=10)
    assert refused.value.code == 404
