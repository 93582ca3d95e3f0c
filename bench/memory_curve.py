"""Flat memory, shown: the server's resident memory over 100 distinct Hub ids and 100 distinct
uploads, chapter by chapter (every chapter whose case takes a model, cpu-offloading included).

Each chapter gets a guide server of its own (so its curve is its own), reading the Hub from the
local stand-in (tests/hub_server.py), and two Chromium pages on it (Playwright on loopback),
doing at once what readers do:
- one types a Hub id into the case bar's model field and presses Enter, 100 times: each id
  is a repository of the stand-in Hub holding a small but real config (llama, mistral or
  qwen2, its width, depth and vocabulary distinct), so each is fetched, checked and built
  afresh;
- the other uploads a distinct config.json through the case bar's file input (the popover's
  uploader; a new file replaces the last), 100 times, each built afresh too.
Each step ends when the case summary names the new model and the page has finished its run.
The two meet at 0, 10, 25, 50 and 100 steps, where the server process's resident size and the
build processes' share are read apart (/proc; the worker template is the server's child, the
workers its children, and they share pages: each is read by its PSS), so the curve
says which of the two grows. Builds run with the production limits, except the time limit
(60 s instead of 20 s: on a starved machine a small build can wait that long for a core).

Run: python -m bench memory_curve [--chapters cpu-offloading oom ...] [--steps 100] [--parallel 2]
[--json out.json]. The browser shares the machine's cores with the servers: steps are slow on
a busy machine, the memory figures much less so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from bench.load import SESSION_TIMEOUT_MS, MemorySampler, upload_and_wait, wait_idle
from tests.browser import CHROMIUM, CHROMIUM_ARGS, GuideServer

MARKS = (0, 10, 25, 50, 100)
FAMILIES = (("llama", "LlamaForCausalLM"), ("mistral", "MistralForCausalLM"), ("qwen2", "Qwen2ForCausalLM"))
SUMMARY = ".st-key-case-summary"
MiB = 2**20


def model_chapters() -> list[str]:
    """Every chapter whose case bar takes a model (the home page included, as ""), in reading order."""
    from guide.chapters import CHAPTERS

    return [chapter.slug for chapter in CHAPTERS if "model" in chapter.case]


def distinct_config(chapter: int, index: int, upload: bool) -> dict:
    """A small config no other step of the run uses: the family, width, depth and vocabulary
    change with the step, the vocabulary also with the chapter and the kind of step."""
    model_type, architecture = FAMILIES[index % len(FAMILIES)]
    hidden = 64 * (1 + index % 4)
    return {"model_type": model_type, "architectures": [architecture], "hidden_size": hidden,
            "intermediate_size": 2 * hidden + 8 * (index % 5), "num_hidden_layers": 1 + index % 3,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
            "vocab_size": 1000 + 1000 * chapter + 2 * index + int(upload), "torch_dtype": "bfloat16",
            "tie_word_embeddings": False, "rms_norm_eps": 1e-5}


def hub_id(slug: str, index: int) -> str:
    return f"curve/{slug or 'home'}-{index}"


def fill_hub(hub, chapters: list[str], count: int) -> None:
    for number, slug in enumerate(chapters):
        for index in range(1, count + 1):
            hub.add(hub_id(slug, index), {"config.json": distinct_config(number, index, upload=False)})


def reading(memory: MemorySampler) -> dict:
    own, workers = memory.split()
    return {"server": own, "workers": sum(workers), "worker_count": len(workers)}


async def settled(page, name: str) -> None:
    """Until the case summary names `name` and the page has finished its run."""
    await page.wait_for_function(
        "([s, t]) => { const e = document.querySelector(s); return !!e && e.innerText.includes(t); }",
        arg=[SUMMARY, name], timeout=SESSION_TIMEOUT_MS, polling=100)
    await wait_idle(page)


async def type_model(page, name: str) -> None:
    """Type a Hub id into the case bar's model field and press Enter, as a reader does (a rerun
    of the page, as a link opened in the same tab would be, without reloading the frontend).
    Under load a rerun can redraw the box between the click and the keys: type again."""
    box = page.locator(".st-key-case_model [data-testid='stSelectbox']")
    field = box.locator("input")
    for _ in range(3):
        await box.click(timeout=SESSION_TIMEOUT_MS)
        await page.keyboard.press("Control+A")
        await page.keyboard.type(name)
        try:
            await page.wait_for_function("([e, t]) => e.value === t", arg=[await field.element_handle(), name],
                                         timeout=5_000, polling=100)
            break
        except Exception:
            continue
    await page.keyboard.press("Enter")


def progress(slug: str, kind: str, step: int, memory: MemorySampler, started: float) -> dict:
    now = reading(memory)
    print(f"  [{slug or 'home'}] {kind} {step}: server {now['server'] / MiB:.0f} MiB, {now['worker_count']} build processes "
          f"{now['workers'] / MiB:.0f} MiB, {time.perf_counter() - started:.0f} s", flush=True)
    return now


async def open_chapter(browser, url: str, slug: str):
    context = await browser.new_context(viewport={"width": 1280, "height": 500})
    page = await context.new_page()
    await page.goto(f"{url}/{slug}?lang=en", timeout=SESSION_TIMEOUT_MS)
    await page.locator(SUMMARY).wait_for(timeout=SESSION_TIMEOUT_MS)
    await wait_idle(page)
    return context, page


async def hub_step(page, slug: str, number: int, index: int, folder: Path) -> None:
    name = hub_id(slug, index)
    await type_model(page, name)
    await settled(page, name)


async def upload_step(page, slug: str, number: int, index: int, folder: Path) -> None:
    path = folder / f"{slug or 'home'}-upload-{index}.json"
    path.write_text(json.dumps(distinct_config(number, index, upload=True)))
    await upload_and_wait(page, path, (f"uses your file {path.name}",))
    await settled(page, path.name)


async def chapter_curve(browser, url: str, slug: str, number: int, steps: int, memory: MemorySampler,
                        folder: Path) -> dict:
    """One chapter's curve: two readers on its server at once, one typing a distinct Hub id
    into the case bar at each step, the other uploading a distinct config; they meet at each
    mark, where the server and its workers are read. {"curve": {step: reading}, errors, seconds}."""
    result = {"chapter": slug or "home", "curve": {}, "errors": [], "seconds": 0.0}
    marks = sorted({m for m in MARKS if m <= steps} | {steps})
    meet = asyncio.Barrier(2)
    started = time.perf_counter()

    async def reader(kind: str, step) -> None:
        try:
            context, page = await open_chapter(browser, url, slug)
        except Exception as error:
            result["errors"].append(f"{kind}: the chapter did not open: {type(error).__name__}")
            await meet.abort()  # the other reader stops at its next mark instead of waiting forever
            return
        try:
            await meet.wait()
            if kind == "hub":
                result["curve"][0] = progress(slug, "distinct Hub ids and uploads", 0, memory, started)
            for index in range(1, steps + 1):
                try:
                    await step(page, slug, number, index, folder)
                except Exception as error:  # a timeout is an error of the run, reported
                    result["errors"].append(f"{kind} {index}: {type(error).__name__}: "
                                            f"{str(error).splitlines()[0][:120]}")
                if index in marks:
                    await meet.wait()
                    if kind == "hub":
                        result["curve"][index] = progress(slug, "distinct Hub ids and uploads", index, memory, started)
                        for line in result["errors"][-3:]:
                            print(f"    ! {line}", flush=True)
            if await page.locator("[data-testid='stException']").count():
                result["errors"].append(f"{kind}: an exception on the page")
        except asyncio.BrokenBarrierError:
            result["errors"].append(f"{kind}: stopped, the other reader could not go on")
        finally:
            await context.close()

    await asyncio.gather(reader("hub", hub_step), reader("upload", upload_step))
    result["seconds"] = time.perf_counter() - started
    return result


def guide_server(hub) -> GuideServer:
    return GuideServer({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url, "CALCULATOR_BUILD_SECONDS": "60",
                        "HF_HOME": tempfile.mkdtemp(prefix="bench-hf-home-")})


async def measured(browser, server: GuideServer, memory: MemorySampler, slug: str, steps: int, folder: Path) -> dict:
    """One chapter's curve on `server`; a chapter that fails is reported and the others go on."""
    try:
        row = await chapter_curve(browser, server.url, slug, model_chapters().index(slug), steps, memory, folder)
    except Exception as error:
        row = {"chapter": slug or "home", "curve": {}, "errors": [f"{type(error).__name__}: {str(error)[:120]}"],
               "seconds": 0.0}
    print_chapter(row, flush=True)
    return row


async def chapter_on_its_server(browser, hub, slug: str, steps: int, folder: Path) -> list[dict]:
    """One chapter's curve, measured on a server of its own (so the curve is that chapter's alone)."""
    server = guide_server(hub)
    try:
        await asyncio.to_thread(server.wait, 180)
        with MemorySampler(server.process.pid) as memory:
            return [await measured(browser, server, memory, slug, steps, folder)]
    finally:
        server.stop()


async def chapters_on_one_server(browser, hub, chapters: list[str], steps: int, folder: Path) -> list[dict]:
    """The chapters one after the other on one server, as readers would reach them: each
    chapter's curve starts where the previous one ended (no server start, no worker start per
    chapter: the fastest way through on a busy machine)."""
    server = guide_server(hub)
    try:
        await asyncio.to_thread(server.wait, 180)
        with MemorySampler(server.process.pid) as memory:
            return [await measured(browser, server, memory, slug, steps, folder) for slug in chapters]
    finally:
        server.stop()


async def run(hub, chapters: list[str], steps: int, parallel: int) -> list[dict]:
    """`parallel` chapters at a time, each on its own server (0: all on one server, one after
    the other), one Chromium for all."""
    from playwright.async_api import async_playwright

    results = []
    with tempfile.TemporaryDirectory() as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            if parallel == 0:
                results = await chapters_on_one_server(browser, hub, chapters, steps, Path(folder))
            for first in range(0, len(chapters) if parallel else 0, max(parallel, 1)):
                for rows in await asyncio.gather(*[chapter_on_its_server(browser, hub, slug, steps, Path(folder))
                                                   for slug in chapters[first:first + parallel]]):
                    results += rows
            await browser.close()
    return results


def flat(curve: dict, tolerance: int = 16 * MiB) -> bool:
    """Whether the server process ends within `tolerance` of where it stood after the first
    10 steps (the first builds load what every later one reuses)."""
    steps = sorted(curve)
    start = curve[10 if 10 in curve else steps[0]]["server"]
    return curve[steps[-1]]["server"] - start <= tolerance


def print_chapter(row: dict, flush: bool = False) -> None:
    curve = row["curve"]
    cells = ", ".join(f"{step}: {r['server'] / MiB:.0f} + {r['workers'] / MiB:.0f} ({r['worker_count']})"
                      for step, r in sorted(curve.items()))
    print(f"\n{row['chapter']}: {row['seconds']:.0f} s, errors {len(row['errors'])}; server + build processes MiB "
          f"(how many) at {cells}; flat: {flat(curve) if len(curve) > 1 else '-'}", flush=flush)
    for line in row["errors"][:5]:
        print(f"  ! {line}", flush=flush)


def table(results: list[dict]) -> str:
    """docs/benchmarks.md's table: per chapter, the server process and its build workers at each mark."""
    marks = sorted({step for row in results for step in row["curve"]})
    lines = ["| chapter | " + " | ".join(f"after {m} + {m}" for m in marks) + " | server flat | errors |",
             "|---|" + "---|" * len(marks) + "---|---|"]
    for row in results:
        curve = row["curve"]
        cells = [f"{curve[m]['server'] / MiB:.0f} + {curve[m]['workers'] / MiB:.0f} ({curve[m]['worker_count']})"
                 if m in curve else "-" for m in marks]
        lines.append(f"| {row['chapter']} | " + " | ".join(cells)
                     + f" | {'yes' if len(curve) > 1 and flat(curve) else 'no'} | {len(row['errors'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from tests.hub_server import FakeHub

    parser = argparse.ArgumentParser(prog="python -m bench memory_curve")
    parser.add_argument("--chapters", nargs="+", default=None,
                        help="slugs (home for the home page); default: every chapter that takes a model")
    parser.add_argument("--steps", type=int, default=100,
                        help="distinct Hub ids, and as many distinct uploads, per chapter")
    parser.add_argument("--parallel", type=int, default=2, help="chapters measured at once, each on its own server; 0: all on one server, one after the other")
    parser.add_argument("--json", type=Path, default=None, help="write the readings here too")
    args = parser.parse_args(argv if argv is not None else [])
    known = model_chapters()
    chapters = [("" if slug == "home" else slug) for slug in (args.chapters or [c or "home" for c in known])]
    unknown = [slug for slug in chapters if slug not in known]
    if unknown:
        parser.error(f"not a chapter that takes a model: {', '.join(unknown)} (choose from "
                     f"{', '.join(c or 'home' for c in known)})")
    hub = FakeHub()
    fill_hub(hub, known, args.steps)
    hub.start()
    started = time.perf_counter()
    try:
        results = asyncio.run(run(hub, chapters, args.steps, args.parallel))
    finally:
        hub.stop()
    print(f"\nserver (resident) + build processes (template and workers, PSS; how many), MiB, after N distinct Hub ids and N distinct uploads; "
          f"{time.perf_counter() - started:.0f} s in all\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
