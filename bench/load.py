"""Many readers at once: concurrent browser sessions (Playwright contexts, one Chromium, on
loopback) against one running guide. Each session reads chapters, changes a calculator input
several times, estimates a catalog model and uploads a config of its own. Reports errors,
p50/p95 from a changed input to the updated figure, the server's memory over the run (its
process and its build workers), and whether any session ever saw another's value or upload.

Beside the readers, hostile sessions (--hostile per level) upload large configs (a distinct
405B-class config, one that asks for 10^8 labels, one too slow to build) and open links whose
numbers no field can hold (inf, 1e309, 400 digits): each must get its answer or its refusal,
never an error. Then one session uploads --uploads distinct 405B-class configs one after the
other, and the server's memory is read before and after.

With --hub-hostile N, the guide reads the Hub from a hostile stand-in (tests/hub_server.py)
and N sessions ask it for models whose answers are huge (a 300 MB config.json, a 64 MiB index of
`[{},{},...]`, a 16 MiB header), slow (a byte every 2 s), stalled, or redirected elsewhere:
each must show its refusal within the Hub's bound, beside the ordinary readers.

The browser runs on the same two cores as the server, so the figures are pessimistic for the
server. Run: python -m bench load [--levels 1 2 4 8 ...] [--rounds N] [--hostile N] [--hub-hostile N]
[--uploads N]
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

from bench import processes
from tests.browser import CHROMIUM, CHROMIUM_ARGS, GuideServer

ROOT = Path(__file__).resolve().parent.parent
TINY = json.loads((ROOT / "tests" / "configs" / "tiny-llama.json").read_text())
CATALOG = ROOT / "calculator" / "models" / "catalog" / "configs"
BIG = json.loads((CATALOG / "llama-3.1-405b.json").read_text())
LABELS = {**json.loads((CATALOG / "bert-base-cased.json").read_text()),
          "architectures": ["BertForSequenceClassification"], "num_labels": 100_000_000}
# Allowed by every static check, too slow to build within the limit: 4,096 separate experts.
SLOW = {"model_type": "switch_transformers", "architectures": ["SwitchTransformersForConditionalGeneration"],
        "d_model": 64, "d_ff": 128, "num_layers": 12, "num_decoder_layers": 12, "num_heads": 4, "d_kv": 16,
        "vocab_size": 1000, "num_experts": 4096, "encoder_sparse_step": 1, "decoder_sparse_step": 1}
HOSTILE_LINKS = [("oom", "fr", "cm_batch", "inf", "batch-size"), ("fine-tuning", "en", "tm_batch", "1e309", "activations"),
                 ("cpu-offloading", "fr", "om_gpu_gib", "-inf", "device-map"),
                 ("slow-model", "en", "bs_prompt", "9" * 400, "batch-size")]
NOTICES = ("which this calculator cannot use", "que ce calculateur ne peut pas utiliser")
TOO_LARGE = ("too large to build", "trop grande pour être construite")
SESSION_TIMEOUT_MS = 120_000


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores, every process: the browser too)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class MemorySampler:
    """The server's memory (its process resident, its descendants' share), sampled twice a second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self.own: list[int] = []  # the server process alone, without its build workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss_of(pid: int) -> int:
        return processes.resident_bytes(pid)

    def _rss(self) -> int:
        """The server's resident bytes and its descendants' share (PSS): the build workers
        share most of their pages with their template, and RSS would count them twice."""
        return self._rss_of(self.pid) + sum(processes.proportional_bytes(p) for p in self._children())

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (user + system, its threads included)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _children(self) -> list[int]:
        """Every descendant of the server: the worker template and the workers it forked."""
        return processes.descendants(self.pid)

    def split(self) -> tuple[int, list[int]]:
        """Bytes now: the server process alone (resident), and each of its descendants (the
        worker template and the build workers, PSS)."""
        return self._rss_of(self.pid), [processes.proportional_bytes(pid) for pid in self._children()]

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - start, self._rss()))
            self.own.append(self._rss_of(self.pid))
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
        # Read a chapter, then change the prompt length in the chapter's case bar: the batch-size
        # calculator's figure names the context (prompt + 256 new tokens), so each session
        # checks its own.
        await page.goto(f"{url}/slow-model?lang={'fr' if index % 2 else 'en'}", timeout=SESSION_TIMEOUT_MS)
        widget = ".st-key-widget-batch-size"
        # The prompt box by its key, not by its rank: under load the first number input of
        # the page was not always this one, and typed values went to another input.
        box = page.locator(".st-key-case_prompt input")
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
        # The case's model (not the estimator's own es_model, which would win over the upload
        # the session then puts into the case).
        await page.goto(f"{url}/estimator?lang=en&model=mistralai%2FMistral-7B-v0.1", timeout=SESSION_TIMEOUT_MS)
        await wait_text(page, ".st-key-widget-estimator", "7,241,732,096")
        name = f"session-{index}.json"
        path = upload_dir / name
        path.write_text(json.dumps({**TINY, "hidden_size": 64 + 8 * (index % 8), "num_attention_heads": 4}))
        step = "upload a config"
        await upload_and_wait(page, path, (f"Figures for your file {name}",))
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


async def upload_and_wait(page, path: Path, texts: tuple[str, ...], timeout_ms: int = SESSION_TIMEOUT_MS) -> str:
    """Upload a file through the case bar (its popover holds the uploader; a new file replaces
    the last); return which of `texts` the page then shows (the estimator's figures, or the
    bar's refusal)."""
    uploader = page.locator("[data-testid='stPopoverBody'] [data-testid='stFileUploaderDropzoneInput']")
    if not await uploader.count():
        await page.locator(".st-key-case-bar [data-testid='stPopover'] button").first.click(timeout=SESSION_TIMEOUT_MS)
    await uploader.set_input_files(str(path), timeout=SESSION_TIMEOUT_MS)
    found = await page.wait_for_function(
        "([s, ts]) => { const e = document.querySelector(s); if (!e) return null;"
        " const t = e.innerText; return ts.find(x => t.includes(x)) || null; }",
        arg=["[data-testid='stMain']", list(texts)], timeout=timeout_ms)
    return await found.json_value()


_LEVEL = [0]


def level_seed() -> int:
    """A number for each level, so that a level's hostile configs were never built before."""
    return _LEVEL[0]


async def hostile_journey(browser, url: str, index: int, upload_dir: Path) -> dict:
    """A hostile reader: large configs uploaded, links with numbers no field can hold.
    Every step must end in its answer or its refusal; anything else is an error."""
    result = {"times": [], "errors": [], "leaks": [], "refused": 0, "answered": 0}
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    step = "open the estimator"
    try:
        lang = "fr" if index % 2 else "en"
        await page.goto(f"{url}/estimator?lang={lang}", timeout=SESSION_TIMEOUT_MS)
        await page.locator(".st-key-widget-estimator").wait_for(timeout=SESSION_TIMEOUT_MS)
        uploads = [("big", {**BIG, "vocab_size": 128_256 + 1000 * index + 7}, ("Figures for your file",
                                                                                "Chiffres pour votre fichier")),
                   ("labels", LABELS, ("num_labels",)),
                   ("slow", {**SLOW, "vocab_size": 1000 + index + 10 * level_seed()}, TOO_LARGE)]  # distinct: built
        for name, config, expected in uploads:
            step = f"upload {name}"
            path = upload_dir / f"hostile-{index}-{name}.json"
            path.write_text(json.dumps(config))
            await upload_and_wait(page, path, expected, timeout_ms=180_000)
            result["answered" if name == "big" else "refused"] += 1
        for slug, link_lang, key, value, anchor in HOSTILE_LINKS:
            step = f"open /{slug}?{key}={value[:10]}"
            await page.goto(f"{url}/{slug}?lang={link_lang}&{key}={value}#{anchor}", timeout=SESSION_TIMEOUT_MS)
            await page.wait_for_function(
                "(ns) => { const m = document.querySelector(\"[data-testid='stMain']\");"
                " return !!m && ns.some(n => m.innerText.includes(n)); }", arg=list(NOTICES), timeout=SESSION_TIMEOUT_MS)
            await page.wait_for_function("(k) => !new URL(location.href).searchParams.has(k)", arg=key,
                                         timeout=SESSION_TIMEOUT_MS)  # the page took it out of the address bar
            if not page.url.endswith(f"#{anchor}"):
                result["errors"].append(f"hostile {index}: /{slug} lost its #{anchor}: {page.url[:120]}")
            result["refused"] += 1
        if await page.locator("[data-testid='stException']").count():
            result["errors"].append(f"hostile {index}: an exception on the page")
    except Exception as error:
        result["errors"].append(f"hostile {index}, {step}: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
    finally:
        await context.close()
    return result


def hostile_hub():
    """A stand-in Hub whose repositories answer badly, each a way the real one must be read."""
    from tests.hub_server import FakeHub

    hub = FakeHub()
    hub.start()
    return hub


def hub_cases(hub, index: int) -> list[tuple[str, str]]:
    """(repo id, what it does) for one hostile session; ids distinct per level and session,
    so nothing is answered from a cache."""
    unknown = {"model_type": "not-a-known-type", "architectures": ["NopeForCausalLM"]}
    header = b"{" + b"".join(b'"%07d":{},' % i for i in range(1_200_000)) + b'"x":{}}'
    cases = []
    for name, files, how in [
        ("huge-config", {}, {"config.json": {"huge": 300_000_000, "fill": b'{"a": 1, '}}),
        ("huge-index", {"config.json": unknown, "model.safetensors": b"\x02" + b"\0" * 7 + b"{}"},
         {"model.safetensors.index.json": {"huge": 64 * 2**20, "fill": b"[{},"}}),
        ("wide-header", {"config.json": unknown, "model.safetensors": len(header).to_bytes(8, "little") + header}, {}),
        ("slow", {}, {"config.json": {"trickle": 2.0, "huge": 10_000}}),
        ("stalled", {}, {"config.json": {"stall": 600}}),
        ("redirect", {}, {"config.json": {"redirect": "http://localhost:9/elsewhere/config.json"}}),
    ]:
        repo = f"evil/{name}-{level_seed()}-{index}"
        hub.add(repo, files)
        for filename, misbehaviour in how.items():
            hub.hostile[f"{repo}/{filename}"] = misbehaviour
        cases.append((repo, name))
    return cases


async def hub_journey(browser, url: str, index: int, hub) -> dict:
    """A reader whose Hub ids get hostile answers: each must end in a refusal that names the
    id, within the Hub's bound (and the build limit, for what is parsed in a worker)."""
    from calculator.models.hub import limit_seconds

    result = {"times": [], "errors": [], "leaks": [], "refused": 0, "answered": 0, "hub_seconds": {}}
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    bound = limit_seconds() + 20 + 5  # the Hub's deadline, the build limit, the page's own run
    try:
        for repo, name in hub_cases(hub, index):
            lang = "fr" if (index + len(result["hub_seconds"])) % 2 else "en"
            start = time.perf_counter()
            await page.goto(f"{url}/estimator?lang={lang}&model={repo}", timeout=SESSION_TIMEOUT_MS)
            await page.wait_for_function(
                "(r) => [...document.querySelectorAll(\"[data-testid='stAlert']\")].some(a => a.innerText.includes(r))",
                arg=repo, timeout=SESSION_TIMEOUT_MS)
            seconds = time.perf_counter() - start
            result["hub_seconds"][name] = seconds
            result["refused"] += 1
            if seconds > bound:
                result["errors"].append(f"hub {index}: {name} refused after {seconds:.1f} s (bound {bound} s)")
        if await page.locator("[data-testid='stException']").count():
            result["errors"].append(f"hub {index}: an exception on the page")
    except Exception as error:
        result["errors"].append(f"hub {index}: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
    finally:
        await context.close()
    return result


async def level(url: str, sessions: int, rounds: int, hostile: int = 0, hub_hostile: int = 0, hub=None) -> dict:
    from playwright.async_api import async_playwright

    _LEVEL[0] += 1

    with tempfile.TemporaryDirectory() as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            started = time.perf_counter()
            readers = [journey(browser, url, i, rounds, Path(folder)) for i in range(sessions)]
            attackers = [hostile_journey(browser, url, 100 + i, Path(folder)) for i in range(hostile)]
            attackers += [hub_journey(browser, url, 200 + i, hub) for i in range(hub_hostile)]
            results = await asyncio.gather(*readers, *attackers)
            elapsed = time.perf_counter() - started
            await browser.close()
    readers_results, hostile_results = results[:sessions], results[sessions:]
    times = sorted(t for r in readers_results for t in r["times"])
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] if times else float("nan")  # noqa: E731
    return {"sessions": sessions, "changes": len(times), "p50": statistics.median(times) if times else float("nan"),
            "p95": p(0.95), "errors": [e for r in readers_results for e in r["errors"]],
            "leaks": [x for r in readers_results for x in r["leaks"]], "seconds": elapsed, "hostile": hostile,
            "hostile_errors": [e for r in hostile_results for e in r["errors"]],
            "hostile_refused": sum(r["refused"] for r in hostile_results),
            "hostile_answered": sum(r["answered"] for r in hostile_results),
            "hub_seconds": [r["hub_seconds"] for r in hostile_results if "hub_seconds" in r]}


async def distinct_uploads(url: str, count: int) -> dict:
    """One reader uploads `count` distinct 405B-class configs, one after the other."""
    from playwright.async_api import async_playwright

    errors, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = await browser.new_context(viewport={"width": 1280, "height": 1000})
            page = await context.new_page()
            await page.goto(f"{url}/estimator?lang=en", timeout=SESSION_TIMEOUT_MS)
            await page.locator(".st-key-widget-estimator").wait_for(timeout=SESSION_TIMEOUT_MS)
            for i in range(count):
                path = Path(folder) / f"upload-{i}.json"
                path.write_text(json.dumps({**BIG, "vocab_size": 130_000 + i}))
                try:
                    await upload_and_wait(page, path, (f"Figures for your file upload-{i}.json",))
                except Exception as error:
                    errors.append(f"upload {i}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            await context.close()
            await browser.close()
    return {"uploads": count, "errors": errors, "seconds": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench load")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16])
    parser.add_argument("--rounds", type=int, default=5, help="input changes per session")
    parser.add_argument("--hostile", type=int, default=2, help="hostile sessions beside the readers, per level")
    parser.add_argument("--hub-hostile", type=int, default=1,
                        help="sessions asking a hostile stand-in Hub for models, per level")
    parser.add_argument("--uploads", type=int, default=100, help="distinct configs uploaded one after the other")
    args = parser.parse_args(argv if argv is not None else [])
    hub = hostile_hub()
    server = GuideServer({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url,
                          "HF_HOME": tempfile.mkdtemp(prefix="bench-hf-home-")}).wait()
    rows = []
    try:
        with MemorySampler(server.process.pid) as memory:
            asyncio.run(level(server.url, 2, 1))  # warm the server's imports and caches (and a build worker)
            warm_rss, warm_own = memory.samples[-1][1], memory.own[-1]
            for sessions in args.levels:
                before, cpu_before, busy_before = len(memory.samples), memory.cpu_seconds(), machine_busy_seconds()
                row = asyncio.run(level(server.url, sessions, args.rounds, args.hostile, args.hub_hostile, hub))
                row["server_cpu"] = memory.cpu_seconds() - cpu_before
                row["server_cores"] = row["server_cpu"] / row["seconds"]
                row["machine_cores"] = (machine_busy_seconds() - busy_before) / row["seconds"]
                row["rss_peak"] = max(s for _, s in memory.samples[before:]) if len(memory.samples) > before else warm_rss
                row["rss_after"] = memory.samples[-1][1]
                row["own_peak"] = max(memory.own[before:], default=warm_own)
                row["own_after"] = memory.own[-1]
                rows.append(row)
                print(f"{sessions} sessions (+{args.hostile} hostile): p50 {row['p50'] * 1000:.0f} ms, "
                      f"p95 {row['p95'] * 1000:.0f} ms, errors {len(row['errors'])}, hostile errors "
                      f"{len(row['hostile_errors'])} (refused {row['hostile_refused']}, answered {row['hostile_answered']}), "
                      f"leaks {len(row['leaks'])}, RSS {row['rss_after'] / 2**20:.0f} MiB, "
                      f"server CPU {row['server_cores']:.2f} cores, machine {row['machine_cores']:.2f} cores", flush=True)
                print(f"  the server process alone: {warm_own / 2**20:.0f} MiB after warm-up, peak "
                      f"{row['own_peak'] / 2**20:.0f} MiB, {row['own_after'] / 2**20:.0f} MiB after", flush=True)
                for seconds in row["hub_seconds"]:
                    print("  hostile Hub, seconds to the refusal: "
                          + ", ".join(f"{name} {value:.1f}" for name, value in seconds.items()), flush=True)
            uploads = None
            if args.uploads:
                time.sleep(2)
                before_uploads = memory.samples[-1][1]
                mark = len(memory.samples)
                uploads = asyncio.run(distinct_uploads(server.url, args.uploads))
                time.sleep(2)
                uploads.update(rss_before=before_uploads, rss_after=memory.samples[-1][1],
                               rss_peak=max(s for _, s in memory.samples[mark:]))
                print(f"{args.uploads} distinct uploads: {uploads['seconds']:.0f} s, errors {len(uploads['errors'])}, "
                      f"RSS {before_uploads / 2**20:.0f} -> {uploads['rss_after'] / 2**20:.0f} MiB "
                      f"(peak {uploads['rss_peak'] / 2**20:.0f} MiB)", flush=True)
    finally:
        server.stop()
        hub.stop()
    print("\n| sessions at once | hostile beside them | input changes | p50 | p95 | errors | hostile errors "
          "(refusals seen) | sessions that saw another's data | server RSS peak | server RSS after | "
          "server CPU (cores, mean) | whole machine (cores, mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['sessions']} | {r['hostile']} | {r['changes']} | {r['p50'] * 1000:.0f} ms | {r['p95'] * 1000:.0f} ms | "
              f"{len(r['errors'])} | {len(r['hostile_errors'])} ({r['hostile_refused']}) | {len(r['leaks'])} | "
              f"{r['rss_peak'] / 2**20:.0f} MiB | {r['rss_after'] / 2**20:.0f} MiB | "
              f"{r['server_cores']:.2f} | {r['machine_cores']:.2f} |")
    print(f"\nserver RSS after warm-up (process and build workers): {warm_rss / 2**20:.0f} MiB")
    if uploads:
        print(f"{uploads['uploads']} distinct 405B-class uploads, one after the other: {uploads['seconds']:.0f} s, "
              f"errors {len(uploads['errors'])}; server RSS {uploads['rss_before'] / 2**20:.0f} MiB before, "
              f"{uploads['rss_after'] / 2**20:.0f} MiB after, peak {uploads['rss_peak'] / 2**20:.0f} MiB")
    holding = [r["sessions"] for r in rows if r["p95"] < 1.0 and not r["errors"]]
    print(f"largest level with p95 under 1 s and no error: {max(holding) if holding else 'none'}")
    for r in rows:
        for line in r["errors"][:5] + r["hostile_errors"][:5] + r["leaks"][:5]:
            print(f"  [{r['sessions']}] {line}")
    for line in (uploads or {}).get("errors", [])[:5]:
        print(f"  [uploads] {line}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
