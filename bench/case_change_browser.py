"""A case change in a real browser, per chapter: for every chapter with a case
bar, Chromium opens it, then a case field is changed several times in the bar; each change is
timed from the key press to the settled page, on the page's own clock. Targets: ≤ 0.4 s median
per chapter, ≤ 1 s p95 with four readers at once, the first heading ≤ 1 s.

Settled means: Streamlit's status widget is gone, the main area's text differs from before
the change (a figure that depends on the case moved), and the page has not changed for QUIET_MS;
the time is that of the page's last change. The field changed is the first of FIELDS the
chapter's bar shows (every chapter shows a GPU): a number is typed, a GPU picked by its key.

    python -m bench case_change_browser [--changes 5] [--readers 1] [--protocol-readers 0] [--slug oom ...]

With --protocol-readers N, N more readers change the same chapter's case at the same time
without a browser (bench/protocol_reader.py: the messages a page sends, recorded from a real
page first): one Chromium reader beside three of them is four readers whose browsers do not
share the server's two cores, as four readers' computers would not.

Bounded: each wait gives up after 60 s; 9 chapters with 5 changes take about 2 minutes alone,
about 4 with --readers 4 (on the 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from guide import chapters
from tests.browser import CASE_BAR, CHROMIUM, CHROMIUM_ARGS, GuideServer

TIMEOUT_MS = 60_000  # a chapter that builds a model on a busy machine (cpu-offloading) takes long
QUIET_MS = 400
POLL_MS = 50
# The field each chapter's changes go to, the first its bar shows. A number is never typed twice
# in one run (each reader its own values: no reader finds another's answers kept); a GPU cycles.
FIELDS = ("batch", "users", "gpu")
GPUS = ("rtx5090", "h100", "l4", "a100-80gb", "rtx3090")


def value_of(name: str, reader: int, change: int, changes: int, default: object = None) -> str:
    """The `change`-th value `reader` types; a first value equal to the chapter's default
    (slow-model's batch is 8) would change nothing and never settle, so another is typed."""
    if name == "gpu":
        value = GPUS[(reader + change) % len(GPUS)]
        return "a100-40gb" if change == 0 and value == default else value
    value = str(2 + reader * changes + change)
    return "1" if change == 0 and value == str(default) else value


# On the page's clock: when the title appears, when Enter is pressed, when the page last changed.
# What a reader sees change: DOM mutations, except inside a <canvas> (a data grid keeps there a
# hidden accessibility copy of its cells, which glide-data-grid rewrites 200 ms after it has
# drawn them: a debounced memo), and drawing on a canvas (the grid's cells themselves).
WATCH = """
window.__guide = {title: null, enter: null, last: 0, changes: 0, in_charts: 0};
document.addEventListener('keydown', e => {
  if (e.key === 'Enter') Object.assign(window.__guide, {enter: performance.now(), changes: 0, in_charts: 0});
}, true);
const drawn = () => { window.__guide.last = performance.now(); };
for (const name of ['fillText', 'fillRect', 'drawImage', 'fill', 'stroke', 'clearRect']) {
  const draw = CanvasRenderingContext2D.prototype[name];
  CanvasRenderingContext2D.prototype[name] = function (...args) { drawn(); return draw.apply(this, args); };
}
new MutationObserver(list => {
  const now = performance.now();
  for (const m of list) {
    const node = m.target.nodeType === 1 ? m.target : m.target.parentElement;
    if (node && node.closest('canvas')) continue;
    window.__guide.last = now;
    window.__guide.changes += 1;  // DOM mutations since Enter, and how many inside a chart
    if (node && node.closest('.guide-chart')) window.__guide.in_charts += 1;
  }
  if (window.__guide.title === null && document.querySelector("[data-testid='stMainBlockContainer'] h1"))
    window.__guide.title = now;
}).observe(document, {childList: true, subtree: true, characterData: true});
"""
MAIN_TEXT = "() => document.querySelector(\"[data-testid='stMain']\").textContent"
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
# The rerun has run (the case bar writes the new value into the address bar), the page changed
# after the Enter and has been still since: the typed value alone (the input's "Press Enter"
# note) could otherwise pass for a settled page before the rerun began (a negative time).
SETTLED = """([before, quiet, name, value]) => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector("[data-testid='stMain']").textContent === before) return false;
  if (name !== null && new URLSearchParams(location.search).get(name) !== value) return false;
  if (window.__guide.last <= window.__guide.enter) return false;
  return performance.now() - window.__guide.last > quiet;
}"""
TYPED = "([selector, value]) => document.querySelector(selector)?.value === value"
WHY_NOT_SETTLED = """([before, name]) => ({
  running: !!document.querySelector('[data-testid="stStatusWidget"]'),
  text_changed: document.querySelector("[data-testid='stMain']").textContent !== before,
  address_value: name === null ? null : new URLSearchParams(location.search).get(name),
  changed_after_enter: window.__guide.last > window.__guide.enter,
  still_for_ms: Math.round(performance.now() - window.__guide.last),
})"""


def field_of(chapter) -> str:
    return next(name for name in FIELDS if name in chapter.case)


async def change(page, name: str, value: str) -> None:
    """Type the value into the bar's field and press Enter (a GPU picker takes a typed key)."""
    # Each step waits for the browser to have done the last (on a loaded machine the keys could
    # otherwise reach a list not open yet, or an input a rerun is drawing again: no change at all).
    field = f"{CASE_BAR} .st-key-case_{name} input"
    box = page.locator(field)
    if name == "gpu":
        await box.click()  # opens the card list
    await box.fill(value)
    await page.wait_for_function(TYPED, arg=[field, value], timeout=TIMEOUT_MS)
    if name == "gpu":
        await page.get_by_role("option").first.wait_for(timeout=TIMEOUT_MS)  # the list offers it
    await box.press("Enter")


async def settle(page, before: str, name: str | None = None, value: str | None = None) -> float:
    """Seconds from the Enter to the page's last change; `name`, `value`: the case field changed
    and the value the address bar must then show."""
    try:
        await page.wait_for_function(SETTLED, arg=[before, QUIET_MS, name, value], timeout=TIMEOUT_MS, polling=POLL_MS)
    except Exception as error:  # say which condition never held
        state = await page.evaluate(WHY_NOT_SETTLED, [before, name])
        raise TimeoutError(f"not settled after {TIMEOUT_MS / 1000:g} s: {state}") from error
    return await page.evaluate("() => (window.__guide.last - window.__guide.enter) / 1000")


async def mutations(page) -> tuple[int, int]:
    """DOM mutations since the last Enter, and those inside charts (read once the page settled)."""
    counts = await page.evaluate("() => [window.__guide.changes, window.__guide.in_charts]")
    return counts[0], counts[1]


async def watched_page(browser):
    """A reader of its own (a fresh browser context) whose page's changes are watched (WATCH)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.add_init_script(WATCH)
    return context, page


async def open_chapter(page, url: str, slug: str) -> float:
    """Open the chapter in English until its title is drawn and Streamlit has finished the run;
    the seconds from the navigation's start to the title."""
    await page.goto(f"{url}/{slug}?lang=en", timeout=TIMEOUT_MS)
    await page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=TIMEOUT_MS)
    heading = await page.evaluate("() => window.__guide.title / 1000")
    await page.wait_for_function(IDLE, timeout=TIMEOUT_MS, polling=POLL_MS)
    return heading


async def reader(browser, url: str, chapter, changes: int, offset: int, values_of: int | None = None) -> dict:
    """One reader (the `offset`-th) on one chapter: its first heading, then `changes` case changes
    (its values those of a reader who makes `values_of` changes, `changes` by default)."""
    context, page = await watched_page(browser)
    result = {"heading": None, "changes": [], "mutations": [], "errors": [], "loaded_at": None, "started_at": []}
    try:
        result["heading"] = await open_chapter(page, url, chapter.slug)
        field = field_of(chapter)
        await page.locator(f"{CASE_BAR} .st-key-case_{field}").wait_for(timeout=TIMEOUT_MS)
        await page.wait_for_timeout(QUIET_MS)
        result["loaded_at"] = time.monotonic()
        for i in range(changes):
            before = await page.evaluate(MAIN_TEXT)
            value = value_of(field, offset, i, values_of or changes, getattr(chapter.defaults, field, None))
            result["started_at"].append(time.monotonic())
            await change(page, field, value)
            result["changes"].append(await settle(page, before, field, value))
            result["mutations"].append(await mutations(page))
    except Exception as error:  # a timeout is reported with the chapter, not raised
        result["errors"].append(f"{chapter.slug or 'home'}: {type(error).__name__}: {str(error).splitlines()[0][:400]}")
    finally:
        await context.close()
    return result


def after_every_load(results: list[dict]) -> list[float]:
    """The changes begun once every reader's page was drawn: with several readers, the others'
    changes can land while a page is still loading (Chromium drawing a whole chapter)."""
    loaded = [r["loaded_at"] for r in results]
    if None in loaded:
        return []
    return [t for r in results for start, t in zip(r["started_at"], r["changes"]) if start >= max(loaded)]


def python_loop_seconds(additions: int = 10**7) -> float:
    """How fast this machine is now: the seconds one core takes for a pure-Python loop. This
    host's speed swings by a third within an hour; printed beside the figures, it is a rough
    sign of the phase a run was made in (it misses some of Chromium's swings)."""
    start, total = time.perf_counter(), 0
    for i in range(additions):
        total += i
    return time.perf_counter() - start


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def median_p95_ms(seconds: list[float]) -> tuple[float, float]:
    """The median and p95 of times in seconds, in milliseconds (NaN for none: a chapter with errors)."""
    values = seconds or [float("nan")]
    return statistics.median(values) * 1000, percentile(values, 0.95) * 1000


def print_errors(rows: list[dict]) -> None:
    """Each chapter's first three errors, under a benchmark's table."""
    for row in rows:
        for line in row["errors"][:3]:
            print(f"  {line}")


async def recorded_change(browser, url: str, chapter, value: str) -> tuple[bytes, bytes]:
    """A real page's first rerun request on the chapter and the one a case change sends (with
    every widget's state), for the readers without a browser (bench/protocol_reader.py)."""
    from bench.protocol_reader import Recorder

    context, page = await watched_page(browser)
    try:
        recorder = Recorder(page)
        await open_chapter(page, url, chapter.slug)
        field = field_of(chapter)
        await page.locator(f"{CASE_BAR} .st-key-case_{field}").wait_for(timeout=TIMEOUT_MS)
        before = await page.evaluate(MAIN_TEXT)
        await change(page, field, value)
        await settle(page, before, field, value)
        reruns = recorder.reruns()
        return reruns[0], reruns[-1]
    finally:
        await context.close()


async def with_protocol_readers(browser, url: str, chapter, changes: int, count: int) -> tuple[dict, list[float]]:
    """One Chromium reader (timed as `reader`) while `count` readers without a browser change
    the chapter's case too, from the same moment until the Chromium reader's last change; the
    Chromium reader's result, and the run time of each of the others' changes."""
    from bench.protocol_reader import protocol_reader

    field = field_of(chapter)
    default = getattr(chapter.defaults, field, None)
    budget = 4 * changes  # values of their own for each (value_of), more than they can use
    try:
        opening, recorded = await recorded_change(browser, url, chapter, value_of(field, count + 1, 0, budget, default))
    except Exception as error:  # reported with the chapter, as a reader's timeout is
        return {"heading": None, "changes": [], "mutations": [], "loaded_at": None, "started_at": [],
                "errors": [f"{chapter.slug or 'home'}: recording a change: {type(error).__name__}: {error}"[:400]]}, []
    stop = asyncio.Event()
    others = [asyncio.create_task(protocol_reader(url, opening, recorded, field,
                                                  [value_of(field, i, k, budget, default) for k in range(budget)],
                                                  QUIET_MS / 1000 + 0.1, stop))
              for i in range(1, count + 1)]
    try:
        result = await reader(browser, url, chapter, changes, 0, values_of=budget)
    finally:
        stop.set()
    answers = await asyncio.gather(*others, return_exceptions=True)
    result["errors"] += [f"{chapter.slug or 'home'}: a reader without a browser: {type(a).__name__}: {a}"[:400]
                         for a in answers if isinstance(a, BaseException)]
    return result, [t for times in answers if not isinstance(times, BaseException) for t in times]


async def measure(url: str, slugs: list[str] | None, changes: int, readers: int, protocol_readers: int = 0) -> list[dict]:
    from playwright.async_api import async_playwright

    rows = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        await reader(browser, url, chapters.CHAPTERS[0], 1, 0)  # warm the server's imports and caches
        for chapter in chapters.CHAPTERS:
            if not chapter.case or (slugs and (chapter.slug or "home") not in slugs):
                continue
            runs = []
            if protocol_readers:
                result, runs = await with_protocol_readers(browser, url, chapter, changes, protocol_readers)
                results = [result]
            else:
                results = await asyncio.gather(*(reader(browser, url, chapter, changes, i) for i in range(readers)))
            times = [t for r in results for t in r["changes"]]
            counts = [c for r in results for c in r["mutations"]] or [(0, 0)]
            rows.append({"slug": chapter.slug or "home", "field": field_of(chapter), "times": times,
                         "settled_times": after_every_load(results),
                         "mutations": statistics.median(c[0] for c in counts),
                         "in_charts": statistics.median(c[1] for c in counts),
                         "heading": statistics.median([r["heading"] for r in results if r["heading"] is not None]
                                                       or [float("nan")]),
                         "errors": [e for r in results for e in r["errors"]], "runs": runs})
            row = rows[-1]
            if times:
                print(f"  {row['slug']}: median {statistics.median(times):.2f} s, p95 {percentile(times, 0.95):.2f} s, "
                      f"heading {row['heading']:.2f} s {row['errors'] or ''}", flush=True)
            else:
                print(f"  {row['slug']}: {row['errors']}", flush=True)
        await browser.close()
    return rows


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench case_change_browser")
    parser.add_argument("--changes", type=int, default=5, help="case changes per reader and chapter")
    parser.add_argument("--readers", type=int, default=1, help="browser contexts on each chapter at once")
    parser.add_argument("--protocol-readers", type=int, default=0,
                        help="readers without a browser beside one Chromium reader (--readers is then 1)")
    parser.add_argument("--slug", nargs="*", help="only these chapters (home for the home page)")
    args = parser.parse_args(options or [])
    speed_before = python_loop_seconds()
    server = GuideServer().wait()
    try:
        rows = asyncio.run(measure(server.url, args.slug, args.changes, args.readers, args.protocol_readers))
    finally:
        server.stop()
    print(f"\nThis machine's speed: a pure-Python loop of 10^7 additions took {speed_before:.2f} s before the run"
          f" and {python_loop_seconds():.2f} s after it.")
    if args.protocol_readers:
        print_with_protocol_readers(rows, args.changes, args.protocol_readers)
        return
    print(f"\n{args.readers} reader(s) at once, {args.changes} changes each per chapter, Chromium, English pages\n")
    several = args.readers > 1
    print("| chapter | field changed | changes | median | p95 | first heading (median) | DOM mutations (in charts)"
          " | errors |" + (" once every page was drawn: changes, median, p95 |" if several else "")
          + "\n|---|---|---|---|---|---|---|---|" + ("---|" if several else ""))
    for row in rows:
        (median, p95), (settled_median, settled_p95) = median_p95_ms(row["times"]), median_p95_ms(row["settled_times"])
        print(f"| /{row['slug']} | {row['field']} | {len(row['times'])} | {median:.0f} ms | {p95:.0f} ms | "
              f"{row['heading'] * 1000:.0f} ms | {row['mutations']:.0f} ({row['in_charts']:.0f}) | {len(row['errors'])} |"
              + (f" {len(row['settled_times'])}, {settled_median:.0f} ms, {settled_p95:.0f} ms |" if several else ""))
    print_errors(rows)


def print_with_protocol_readers(rows: list[dict], changes: int, count: int) -> None:
    print(f"\nOne Chromium reader ({changes} changes) and {count} readers without a browser changing the same "
          "chapter's case at once, English pages\n")
    print("| chapter | field changed | Chromium reader: changes, median, p95 | first heading | the others: "
          "changes, run median, p95 | errors |\n|---|---|---|---|---|---|")
    for row in rows:
        (median, p95), (runs_median, runs_p95) = median_p95_ms(row["times"]), median_p95_ms(row["runs"])
        print(f"| /{row['slug']} | {row['field']} | {len(row['times'])}, {median:.0f} ms, {p95:.0f} ms | "
              f"{row['heading'] * 1000:.0f} ms | {len(row['runs'])}, {runs_median:.0f} ms, {runs_p95:.0f} ms | "
              f"{len(row['errors'])} |")
    print_errors(rows)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
