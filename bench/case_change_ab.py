"""A case change on two checkouts of the guide, in turns: on a shared machine the
load moves more between two runs than a change to the page does, so the old and the new
server run side by side, one browser opens the same chapter on each, and the case's batch
changes on one then the other, the order swapped every round. Times as case_change_browser:
from the Enter key to the settled page, on the page's clock.

    python -m bench case_change_ab --before /path/to/old/checkout [--slug slow-model] [--changes 6]

(a checkout of the old code: `git worktree add /tmp/before <commit>`). Bounded: each wait
gives up after 60 s; 6 changes on each take about a minute on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
import statistics
import sys

from bench.case_change_browser import MAIN_TEXT, TIMEOUT_MS, change, open_chapter, settle, watched_page
from tests.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, GuideServer


async def open_batch_chapter(browser, url: str, slug: str):
    _, page = await watched_page(browser)
    await open_chapter(page, url, slug)
    await page.locator(".st-key-case_batch input").wait_for(timeout=TIMEOUT_MS)
    await page.wait_for_timeout(1000)
    return page


async def compare(trees: dict[str, Path], slug: str, changes: int) -> dict[str, list[float]]:
    from playwright.async_api import async_playwright

    servers = {name: GuideServer(cwd=tree).wait() for name, tree in trees.items()}
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = {name: await open_batch_chapter(browser, server.url, slug) for name, server in servers.items()}
            times: dict[str, list[float]] = {name: [] for name in trees}
            for i in range(changes):
                for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
                    before = await pages[name].evaluate(MAIN_TEXT)
                    await change(pages[name], "batch", str(2 + i))
                    times[name].append(await settle(pages[name], before, "batch", str(2 + i)))
            await browser.close()
    finally:
        for server in servers.values():
            server.stop()
    return times


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench case_change_ab")
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--slug", default="slow-model", help="a chapter whose case bar has a batch")
    parser.add_argument("--changes", type=int, default=6)
    args = parser.parse_args(options or [])
    if args.before is None:  # `python -m bench` runs every benchmark: this one needs a checkout
        print("case_change_ab: no --before checkout given, nothing compared")
        return
    times = asyncio.run(compare({"before": args.before.resolve(), "after": ROOT}, args.slug, args.changes))
    print(f"| /{args.slug}, batch changed in turns | median | each change |\n|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values) * 1000:.0f} ms | "
              + ", ".join(f"{v * 1000:.0f}" for v in values) + " ms |")


if __name__ == "__main__":
    main(sys.argv[1:])
