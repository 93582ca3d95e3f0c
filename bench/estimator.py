"""Estimator speed: from choosing a model to its table, cold (first time in a fresh server
process) and warm (cached), for a catalog model and for an uploaded copy of a 405B config
(which forces a real meta-device count). Measured twice: on the server alone (AppTest, a
full script run, in a fresh process) and in a real browser (from the click or the upload
to the table on screen, on a fresh `streamlit run`). Run: python -m bench estimator"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG_405B = ROOT / "calculator" / "models" / "catalog" / "configs" / "llama-3.1-405b.json"
ID_405B = "meta-llama/Llama-3.1-405B"
PARAMS_405B = "405,853,388,800"


def _timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def server_side() -> None:
    """Runs in a fresh process: prints the timings as one JSON object."""
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    from tests.apptest import open_page

    # the estimator's own model picker is drawn when the link gives it a value (its panel is lazy)
    at = open_page("estimator", "en", es_model="meta-llama/Llama-3.1-8B")
    times = {"first page (imports included)": time.perf_counter() - start}
    times["page rerun, nothing new"] = _timed(at.run)

    def pick(model_id: str):
        return lambda: at.selectbox(key="es_model").set_value(model_id).run()

    times["catalog 405B, cold"] = _timed(pick(ID_405B))
    assert PARAMS_405B in [m.value for m in at.metric]
    pick("openai-community/gpt2")()
    times["catalog 405B, warm"] = _timed(pick(ID_405B))
    raw = CONFIG_405B.read_bytes()

    def upload(content: bytes):
        def run():
            at.get("file_uploader")[0].set_value(("config.json", content, "application/json"))
            at.run()
        return run

    times["uploaded 405B config, cold (first count: imports torch and transformers)"] = _timed(upload(raw))
    assert PARAMS_405B in [m.value for m in at.metric], [m.value for m in at.metric]
    times["uploaded 405B config, warm (cached)"] = _timed(upload(raw))
    other = json.loads(raw)
    other["vocab_size"] += 64  # a config never counted before: the meta-device build alone
    times["another 405B-class config, modules already imported"] = _timed(upload(json.dumps(other).encode()))
    print(json.dumps(times))


def browser_side() -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    from tests.browser import GuideServer, launch_browser, wait_for_page

    widget = ".st-key-widget-estimator"
    wait_js = "([sel, t]) => { const w = document.querySelector(sel); return !!w && w.innerText.includes(t); }"
    server = GuideServer().wait()
    times: dict[str, float] = {}
    try:
        with sync_playwright() as playwright:
            browser = launch_browser(playwright)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(server.url + "/estimator?lang=en")
            wait_for_page(page)

            def choose(model_id: str, expect: str) -> float:
                page.locator(f"{widget} [data-testid='stSelectbox']", has_text="catalog").click()
                page.keyboard.type(model_id.split("/")[-1])
                option = page.get_by_role("option", name=model_id, exact=True)
                start = time.perf_counter()
                option.click()
                page.wait_for_function(wait_js, arg=[widget, expect], polling="raf", timeout=60_000)
                return time.perf_counter() - start

            def upload(path: Path, expect: str) -> float:
                start = time.perf_counter()
                page.locator(f"{widget} [data-testid='stFileUploaderDropzoneInput']").set_input_files(str(path))
                page.wait_for_function(wait_js, arg=[widget, expect], polling="raf", timeout=120_000)
                elapsed = time.perf_counter() - start
                page.locator(f"{widget} [data-testid='stFileChipDeleteBtn']").click()
                page.wait_for_function("([sel, t]) => !document.querySelector(sel).innerText.includes(t)",
                                       arg=[widget, "your file"], timeout=60_000)
                return elapsed

            times["catalog 405B, cold"] = choose(ID_405B, PARAMS_405B)
            choose("openai-community/gpt2", "124,439,808")
            times["catalog 405B, warm"] = choose(ID_405B, PARAMS_405B)
            choose("openai-community/gpt2", "124,439,808")
            # The same bytes under two names: a browser does not re-send a file it just sent.
            with tempfile.TemporaryDirectory() as folder:
                first, second = Path(folder, "config.json"), Path(folder, "config-copy.json")
                first.write_bytes(CONFIG_405B.read_bytes())
                second.write_bytes(CONFIG_405B.read_bytes())
                times["uploaded 405B config, cold"] = upload(first, PARAMS_405B)
                times["uploaded 405B config, warm"] = upload(second, PARAMS_405B)
            browser.close()
    finally:
        server.stop()
    return times


def main() -> None:
    out = subprocess.run([sys.executable, "-c", "from bench.estimator import server_side; server_side()"],
                         cwd=ROOT, check=True, capture_output=True, text=True)
    server = json.loads(out.stdout.strip().splitlines()[-1])
    browser = browser_side()
    print("| server side (AppTest, full script run, fresh process) | time |\n|---|---|")
    for label, seconds in server.items():
        print(f"| {label} | {_show(seconds)} |")
    print("\n| in the browser (fresh server; from the click or upload to the table) | time |\n|---|---|")
    for label, seconds in browser.items():
        print(f"| {label} | {_show(seconds)} |")
    print(json.dumps({"server": server, "browser": browser}), file=sys.stderr)


def _show(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
