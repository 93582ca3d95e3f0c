"""Flat memory, shown: the server's resident memory over 100 distinct Hub ids and 100 distinct
uploads, chapter by chapter (every chapter whose case takes a model, cpu-offloading included).

One guide server, reading the Hub from the local stand-in (tests/hub_server.py), and one
Chromium page per chapter (Playwright on loopback) doing what a reader does:
- opens the chapter with `?model=<Hub id>` (a link, as support answers send them): each id is
  a repository of the stand-in Hub holding a small but real config (llama, mistral or qwen2,
  its width, depth and vocabulary distinct), so each is fetched, checked and built afresh;
- then uploads a distinct config.json through the case bar's file input (the popover's
  uploader; a new file replaces the last), each built afresh too.
After each step, once the page has finished its run, the server process's resident size and
each build worker's are read apart (/proc; the workers are the server's children), so the
curve says which of the two grows. Chapters run one after the other on the same server, as
readers would reach them; each chapter's curve starts where the previous one ended.

Run: python -m bench memory_curve [--chapters slow-model oom ...] [--hub-ids 100] [--uploads 100]
[--json out.json]. The browser shares the machine's cores with the server: steps are slow on
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


async def chapter_curve(browser, url: str, slug: str, number: int, counts: tuple[int, int], memory: MemorySampler,
                        folder: Path) -> dict:
    """The two curves of one chapter: {"hub": {step: reading}, "upload": {...}, errors, seconds}."""
    hub_ids, uploads = counts
    result = {"chapter": slug or "home", "hub": {}, "upload": {}, "errors": [], "seconds": {}}
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    try:
        await page.goto(f"{url}/{slug}?lang=en", timeout=SESSION_TIMEOUT_MS)
        await page.locator(SUMMARY).wait_for(timeout=SESSION_TIMEOUT_MS)
        await wait_idle(page)
        result["hub"][0] = reading(memory)
        started = time.perf_counter()
        for index in range(1, hub_ids + 1):
            name = hub_id(slug, index)
            try:
                await page.goto(f"{url}/{slug}?lang=en&model={name}", timeout=SESSION_TIMEOUT_MS)
                await settled(page, name)
            except Exception as error:  # a timeout is an error of the run, reported
                result["errors"].append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            if index in MARKS or index == hub_ids:
                result["hub"][index] = reading(memory)
        result["seconds"]["hub"] = time.perf_counter() - started
        result["upload"][0] = reading(memory)
        started = time.perf_counter()
        for index in range(1, uploads + 1):
            path = folder / f"{slug or 'home'}-upload-{index}.json"
            path.write_text(json.dumps(distinct_config(number, index, upload=True)))
            try:
                await upload_and_wait(page, path, (f"uses your file {path.name}",))
                await settled(page, path.name)
            except Exception as error:
                result["errors"].append(f"{path.name}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            if index in MARKS or index == uploads:
                result["upload"][index] = reading(memory)
        result["seconds"]["upload"] = time.perf_counter() - started
        if await page.locator("[data-testid='stException']").count():
            result["errors"].append(f"{slug}: an exception on the page")
    finally:
        await context.close()
    return result


async def chapter_on_its_server(browser, hub, slug: str, number: int, counts: tuple[int, int],
                                folder: Path) -> dict:
    """One chapter's curves, measured on a server of its own (so each curve is that chapter's)."""
    server = GuideServer({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url,
                          "HF_HOME": tempfile.mkdtemp(prefix="bench-hf-home-")})
    try:
        await asyncio.to_thread(server.wait, 180)
        with MemorySampler(server.process.pid) as memory:
            row = await chapter_curve(browser, server.url, slug, number, counts, memory, folder)
    finally:
        server.stop()
    print_chapter(row, flush=True)
    return row


async def run(hub, chapters: list[str], counts: tuple[int, int], parallel: int) -> list[dict]:
    """`parallel` chapters at a time, each on its own server, one Chromium for all."""
    from playwright.async_api import async_playwright

    results = []
    all_chapters = model_chapters()
    with tempfile.TemporaryDirectory() as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for first in range(0, len(chapters), parallel):
                group = chapters[first:first + parallel]
                results += await asyncio.gather(*[
                    chapter_on_its_server(browser, hub, slug, all_chapters.index(slug), counts, Path(folder))
                    for slug in group])
            await browser.close()
    return results


def flat(curve: dict, tolerance: int = 16 * MiB) -> bool:
    """Whether the server process ends within `tolerance` of where it stood after the first
    10 steps (the first builds load what every later one reuses)."""
    steps = sorted(curve)
    start = curve[10 if 10 in curve else steps[0]]["server"]
    return curve[steps[-1]]["server"] - start <= tolerance


def print_chapter(row: dict, flush: bool = False) -> None:
    print(f"\n{row['chapter']}: hub ids {row['seconds'].get('hub', 0):.0f} s, uploads "
          f"{row['seconds'].get('upload', 0):.0f} s, errors {len(row['errors'])}", flush=flush)
    for kind in ("hub", "upload"):
        curve = row[kind]
        cells = ", ".join(f"{step}: {r['server'] / MiB:.0f} + {r['workers'] / MiB:.0f} ({r['worker_count']})"
                          for step, r in sorted(curve.items()))
        print(f"  {kind}: server + workers MiB (workers) at {cells}; flat: {flat(curve) if curve else '-'}",
              flush=flush)
    for line in row["errors"][:5]:
        print(f"  ! {line}", flush=flush)


def table(results: list[dict]) -> str:
    """The README's table: per chapter and kind, the server process and its workers at each mark."""
    marks = sorted({step for row in results for kind in ("hub", "upload") for step in row[kind]})
    head = ("| chapter | distinct | " + " | ".join(f"after {m}" for m in marks) + " | flat | errors |\n"
            + "|---|---|" + "---|" * len(marks) + "---|---|")
    lines = [head]
    for row in results:
        for kind, label in (("hub", "Hub ids"), ("upload", "uploads")):
            curve = row[kind]
            cells = [f"{curve[m]['server'] / MiB:.0f} + {curve[m]['workers'] / MiB:.0f}" if m in curve else "-"
                     for m in marks]
            lines.append(f"| {row['chapter']} | {label} | " + " | ".join(cells)
                         + f" | {'yes' if curve and flat(curve) else 'no'} | {len(row['errors'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from tests.hub_server import FakeHub

    parser = argparse.ArgumentParser(prog="python -m bench memory_curve")
    parser.add_argument("--chapters", nargs="+", default=None,
                        help="slugs (home for the home page); default: every chapter that takes a model")
    parser.add_argument("--hub-ids", type=int, default=100, help="distinct Hub ids per chapter")
    parser.add_argument("--uploads", type=int, default=100, help="distinct uploads per chapter")
    parser.add_argument("--parallel", type=int, default=5, help="chapters measured at once, each on its own server")
    parser.add_argument("--json", type=Path, default=None, help="write the readings here too")
    args = parser.parse_args(argv if argv is not None else [])
    known = model_chapters()
    chapters = [("" if slug == "home" else slug) for slug in (args.chapters or [c or "home" for c in known])]
    unknown = [slug for slug in chapters if slug not in known]
    if unknown:
        parser.error(f"not a chapter that takes a model: {', '.join(unknown)} (choose from "
                     f"{', '.join(c or 'home' for c in known)})")
    hub = FakeHub()
    fill_hub(hub, known, args.hub_ids)
    hub.start()
    started = time.perf_counter()
    try:
        results = asyncio.run(run(hub, chapters, (args.hub_ids, args.uploads), args.parallel))
    finally:
        hub.stop()
    print(f"\nserver + build workers, MiB (resident), {time.perf_counter() - started:.0f} s in all\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
