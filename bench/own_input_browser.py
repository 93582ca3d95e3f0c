"""A calculator's own input in a real browser, per chapter (target ≤ 0.3 s): for every
chapter with calculators, Chromium opens it, then the first number a calculator draws outside
the case bar and outside its closed panels (the fine-tuning chapter's GPU count, the oom
chapter's dummy-data batch...) is changed several times; each change is timed from the Enter
key to the settled page, on the page's own clock, as `case_change_browser` times a case change.
Only that calculator reruns (it is a fragment), so the page's other elements are not sent again.

    python -m bench own_input_browser [--changes 5] [--slug oom ...]

Bounded: each wait gives up after 60 s; every chapter with 5 changes takes about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from bench.case_change_browser import (MAIN_TEXT, QUIET_MS, median_p95_ms, open_chapter, print_errors, settle,
                                      watched_page)
from guide import chapters
from tests.browser import CHROMIUM, CHROMIUM_ARGS, GuideServer

NUMBER_WAIT_MS = 5_000  # how long a chapter is given to show a calculator's number
# The key, value and bounds of the first number input a calculator shows on its face: not in the
# case bar, not in a closed panel or a popover, not a measurement the reader pastes.
FIRST_OWN_NUMBER = """() => {
  for (const box of document.querySelectorAll('[data-testid="stMain"] [data-testid="stNumberInput"]')) {
    if (box.closest('.st-key-case-bar, [data-testid="stExpander"], [data-testid="stPopover"]')) continue;
    const holder = box.closest('[class*="st-key-"]');
    const key = holder && [...holder.classList].find(name => name.startsWith('st-key-'));
    const input = box.querySelector('input');
    // a measured speed the reader pastes shows as a whole percent of the ceiling: one step leaves the page as it was
    if (key && input && !key.endsWith('_measured'))
      return [key.slice('st-key-'.length), input.value, input.min, input.max, input.step];
  }
  return null;
}"""


def values_to_type(value: str, low: str, high: str, step: str, changes: int) -> list[str]:
    """`changes` values, each different from the one before, within the input's bounds: upward
    from the shown value by its step (from the lowest when the field is empty), downward once
    the top is reached (a share such as vLLM's 0.9 goes 0.91, 0.92...)."""
    step_size = float(step) if step not in ("", "any", None) else 1.0
    top = float(high) if high not in ("", None) else float("inf")
    bottom = float(low) if low not in ("", None) else float("-inf")
    if value not in ("", None):
        current = float(value)
    else:  # an empty field (the engine's default): from its lowest value up
        current = (bottom if bottom > float("-inf") else 1.0) - step_size
    values, direction = [], 1
    for _ in range(changes):
        if not bottom <= current + direction * step_size <= top:
            direction = -direction
        current += direction * step_size
        values.append(f"{current:.6g}")
    return values


async def reader(browser, url: str, slug: str, changes: int) -> dict:
    context, page = await watched_page(browser)
    result = {"key": None, "changes": [], "errors": []}
    try:
        await open_chapter(page, url, slug)
        try:  # the calculators may still be drawing just after the run ends (the first chapter a server opens)
            await page.wait_for_function(FIRST_OWN_NUMBER, timeout=NUMBER_WAIT_MS)
        except Exception:  # Playwright's TimeoutError: this chapter shows no number of a calculator's own
            return result
        await page.wait_for_timeout(QUIET_MS)
        found = await page.evaluate(FIRST_OWN_NUMBER)
        key, value, low, high, step = found
        result["key"] = key
        for typed in values_to_type(value, low, high, step, changes):
            before = await page.evaluate(MAIN_TEXT)
            box = page.locator(f".st-key-{key} input")
            await box.fill(typed)
            await box.press("Enter")
            result["changes"].append(await settle(page, before, key, typed))
    except Exception as error:  # a timeout is reported with the chapter, not raised
        result["errors"].append(f"{slug}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    finally:
        await context.close()
    return result


async def measure(url: str, slugs: list[str] | None, changes: int) -> list[dict]:
    from playwright.async_api import async_playwright

    rows = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for chapter in chapters.CHAPTERS:
            slug = chapter.slug or "home"
            if not chapter.slug or (slugs and slug not in slugs):
                continue
            result = await reader(browser, url, chapter.slug, changes)
            if result["key"] is None and not result["errors"]:
                continue  # no calculator number on the chapter's face
            rows.append({"slug": slug, **result})
            times = result["changes"]
            if times:
                print(f"  {slug} ({result['key']}): median {statistics.median(times):.2f} s", flush=True)
        await browser.close()
    return rows


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench own_input_browser")
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--slug", nargs="*", help="only these chapters")
    args = parser.parse_args(options or [])
    server = GuideServer().wait()
    try:
        rows = asyncio.run(measure(server.url, args.slug, args.changes))
    finally:
        server.stop()
    print(f"\nA calculator's own number, {args.changes} changes per chapter, one reader, Chromium, English pages\n")
    print("| chapter | input | changes | median | p95 | errors |\n|---|---|---|---|---|---|")
    for row in rows:
        median, p95 = median_p95_ms(row["changes"])
        print(f"| /{row['slug']} | {row['key']} | {len(row['changes'])} | {median:.0f} ms | {p95:.0f} ms | "
              f"{len(row['errors'])} |")
    print_errors(rows)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
