"""Many readers at once: concurrent browser sessions (Playwright contexts, one Chromium, on
loopback) against one running guide. Each session reads chapters, changes a calculator input
several times, estimates a catalog model and uploads a config of its own. Reports errors,
p50/p95 from a changed input to the updated figure, the server's memory over the run, and
whether any session ever saw another's value or upload.

The browser runs on the same two cores as the server, so the figures are pessimistic for the
server. Run: python -m bench load [--levels 1 2 4 8 ...] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.browser import CHROMIUM, CHROMIUM_ARGS, GuideServer

ROOT = Path(__file__).resolve().parent.parent
TINY = json.loads((ROOT / "tests" / "configs" / "tiny-llama.json").read_text())
SESSION_TIMEOUT_MS = 120_000


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores, every process: the browser too)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class MemorySampler:
    """The server's resident memory (its process and children), sampled twice a second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        total = 0
        for pid in [self.pid, *self._children()]:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                pass
        return total

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (user + system, its threads included)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _children(self) -> list[int]:
        try:
            return [int(p) for p in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except OSError:
            return []

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - start, self._rss()))
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


async def wait_text(page, selector: str, text: str) -> None:
    await page.wait_for_function(
        "([s, t]) => { const e = document.querySelector(s); return !!e && e.innerText.includes(t); }",
        arg=[selector, text], timeout=SESSION_TIMEOUT_MS)


async def wait_idle(page) -> None:
    """Until Streamlit has finished running the script (its status widget is gone)."""
    await page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                 timeout=SESSION_TIMEOUT_MS)


async def journey(browser, url: str, index: int, rounds: int, upload_dir: Path) -> dict:
    """One reader. Returns the input-to-figure times, and any error or leak it saw."""
    result = {"times": [], "errors": [], "leaks": []}
    step = "open the chapter"
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    try:
        # Read a chapter, then change the prompt length of the batch-size calculator: the
        # figure names the context (prompt + 256 new tokens), so each session checks its own.
        await page.goto(f"{url}/slow-model?lang={'fr' if index % 2 else 'en'}", timeout=SESSION_TIMEOUT_MS)
        widget = ".st-key-widget-batch-size"
        # The prompt box by its key, not by its rank: under load the first number input of
        # the calculator was not always this one, and typed values went to another input.
        box = page.locator(".st-key-bs_prompt input")
        await box.wait_for(timeout=SESSION_TIMEOUT_MS)
        step = "change the prompt length"
        for round_ in range(rounds):
            # A reader types once the page has finished running.
            await wait_idle(page)
            prompt = 1000 + 37 * index + round_
            context_tokens = prompt + 256
            shown = f"{context_tokens:,}".replace(",", "\u202f" if index % 2 else ",")
            await box.fill(str(prompt))
            start = time.perf_counter()
            await box.press("Enter")
            await wait_text(page, widget, shown)
            result["times"].append(time.perf_counter() - start)
        # Estimate a catalog model, then upload a config only this session has.
        step = "estimate a catalog model"
        await page.goto(f"{url}/estimator?lang=en&es_model=mistralai%2FMistral-7B-v0.1", timeout=SESSION_TIMEOUT_MS)
        await wait_text(page, ".st-key-widget-estimator", "7,241,732,096")
        name = f"session-{index}.json"
        path = upload_dir / name
        path.write_text(json.dumps({**TINY, "hidden_size": 64 + 8 * (index % 8), "num_attention_heads": 4}))
        step = "upload a config"
        await page.locator(".st-key-widget-estimator [data-testid='stFileUploaderDropzoneInput']").set_input_files(str(path))
        await wait_text(page, ".st-key-widget-estimator", f"Figures for your file {name}")
        text = await page.locator(".st-key-widget-estimator").inner_text()
        others = [f"session-{j}.json" for j in range(200) if j != index and f"session-{j}.json" in text]
        if others:
            result["leaks"].append(f"session {index} saw {others}")
        exceptions = await page.locator("[data-testid='stException']").count()
        if exceptions:
            result["errors"].append(f"session {index}: {exceptions} exception(s) on the page")
    except Exception as error:  # a timeout or a crash is an error of the run, reported
        result["errors"].append(f"session {index}, {step}: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
    finally:
        await context.close()
    return result


async def level(url: str, sessions: int, rounds: int) -> dict:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            started = time.perf_counter()
            results = await asyncio.gather(*(journey(browser, url, i, rounds, Path(folder)) for i in range(sessions)))
            elapsed = time.perf_counter() - started
            await browser.close()
    times = sorted(t for r in results for t in r["times"])
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] if times else float("nan")  # noqa: E731
    return {"sessions": sessions, "changes": len(times), "p50": statistics.median(times) if times else float("nan"),
            "p95": p(0.95), "errors": [e for r in results for e in r["errors"]],
            "leaks": [x for r in results for x in r["leaks"]], "seconds": elapsed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench load")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16])
    parser.add_argument("--rounds", type=int, default=5, help="input changes per session")
    args = parser.parse_args(argv if argv is not None else [])
    server = GuideServer().wait()
    rows = []
    try:
        with MemorySampler(server.process.pid) as memory:
            asyncio.run(level(server.url, 2, 1))  # warm the server's imports and caches
            warm_rss = memory.samples[-1][1]
            for sessions in args.levels:
                before, cpu_before, busy_before = len(memory.samples), memory.cpu_seconds(), machine_busy_seconds()
                row = asyncio.run(level(server.url, sessions, args.rounds))
                row["server_cpu"] = memory.cpu_seconds() - cpu_before
                row["server_cores"] = row["server_cpu"] / row["seconds"]
                row["machine_cores"] = (machine_busy_seconds() - busy_before) / row["seconds"]
                row["rss_peak"] = max(s for _, s in memory.samples[before:]) if len(memory.samples) > before else warm_rss
                row["rss_after"] = memory.samples[-1][1]
                rows.append(row)
                print(f"{sessions} sessions: p50 {row['p50'] * 1000:.0f} ms, p95 {row['p95'] * 1000:.0f} ms, "
                      f"errors {len(row['errors'])}, leaks {len(row['leaks'])}, RSS {row['rss_after'] / 2**20:.0f} MiB, "
                      f"server CPU {row['server_cores']:.2f} cores, machine {row['machine_cores']:.2f} cores",
                      flush=True)
    finally:
        server.stop()
    print("\n| sessions at once | input changes | p50 | p95 | errors | sessions that saw another's data | "
          "server RSS peak | server RSS after | server CPU (cores, mean) | whole machine (cores, mean) | "
          "server CPU per journey |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['sessions']} | {r['changes']} | {r['p50'] * 1000:.0f} ms | {r['p95'] * 1000:.0f} ms | "
              f"{len(r['errors'])} | {len(r['leaks'])} | {r['rss_peak'] / 2**20:.0f} MiB | {r['rss_after'] / 2**20:.0f} MiB | "
              f"{r['server_cores']:.2f} | {r['machine_cores']:.2f} | {r['server_cpu'] / r['sessions']:.2f} s |")
    print(f"\nserver RSS after warm-up: {warm_rss / 2**20:.0f} MiB")
    holding = [r["sessions"] for r in rows if r["p95"] < 1.0 and not r["errors"]]
    print(f"largest level with p95 under 1 s and no error: {max(holding) if holding else 'none'}")
    for r in rows:
        for line in r["errors"][:5] + r["leaks"][:5]:
            print(f"  [{r['sessions']}] {line}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
