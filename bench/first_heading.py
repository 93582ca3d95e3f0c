"""Where a chapter's first heading waits (target ≤ 1 s): each chapter is opened in
Chromium beside a bare Streamlit app (one st.title, nothing of ours) served at the same time,
in turns, and the page's own clock gives each step from navigation start: the HTML received,
DOMContentLoaded (Streamlit's JS bundle parsed), the websocket created and opened, its first
message, Streamlit's h1, and the first paint of text (first-contentful-paint). What the bare app
takes is Streamlit's floor on this machine; only the difference is ours.

`title` is when the reader first sees the chapter's title: the first paint when the page's HTML
carries it (guide/page_shell.py: the guide writes it where Streamlit will draw it), else
Streamlit's h1. The bare app's first paint is Streamlit's menu button, not a title.

    python -m bench first_heading [--loads 5] [--slug oom ...]   (home for the home page)
    python -m bench first_heading --network 20 [--rtt 40]

With `--network MBIT`, every load goes over a network Chromium emulates (DevTools protocol:
that bandwidth each way, that round trip), as for a reader away from the server, and the table
adds the bytes the page's HTTP answers took on the wire (the websocket's messages not counted).
This machine's loopback hides what the bytes cost; there the bare app, served by Streamlit
alone, sends its scripts as they are, and the guide gzipped (guide/http.py).

Bounded: each load gives up after 60 s; 10 chapters x 5 loads take about 2 minutes alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from guide import chapters
from tests.browser import CHROMIUM, CHROMIUM_ARGS, GuideServer

TIMEOUT_MS = 60_000
STEPS = ("html", "dom_ready", "socket", "socket_open", "first_message", "heading", "first_paint", "title")
# Set before any of the page's scripts: the websocket's first moments and the first h1.
PROBE = """
window.__first = {socket: null, socket_open: null, first_message: null, heading: null};
const PageSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new PageSocket(...args), first = window.__first;
  if (first.socket === null) first.socket = performance.now();
  socket.addEventListener('open', () => { if (first.socket_open === null) first.socket_open = performance.now(); });
  socket.addEventListener('message', () => { if (first.first_message === null) first.first_message = performance.now(); });
  return socket;
};
window.WebSocket.prototype = PageSocket.prototype;
Object.assign(window.WebSocket, PageSocket);
new MutationObserver(() => {
  if (document.querySelector('.guide-shell-title')) window.__shell = true;  // the guide's title, in the HTML
  if (window.__first.heading === null && document.querySelector('h1')) window.__first.heading = performance.now();
}).observe(document, {childList: true, subtree: true});
"""
READ = """() => { const n = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {html: n.responseEnd, dom_ready: n.domContentLoadedEventEnd, first_paint: paint ? paint.startTime : null,
          ...window.__first}; }"""
SHELL = "() => window.__shell === true"
BARE_APP = 'import streamlit as st\n\nst.title("A bare Streamlit page")\n'


def start_bare(folder: Path) -> GuideServer:
    """A one-line Streamlit app with Streamlit's defaults (no theme, no assets of ours)."""
    (folder / "bare.py").write_text(BARE_APP, encoding="utf-8")
    return GuideServer(cwd=folder, script="bare.py").wait()


async def load(browser, url: str, network: tuple[float, float] | None = None) -> dict[str, float]:
    """One fresh load (new context: nothing cached), each step in ms from navigation start;
    over `network` (Mbit/s, round trip in ms) if given, with the bytes on the wire then."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = await context.new_page()
        await page.add_init_script(PROBE)
        wire = []
        if network is not None:
            cdp = await context.new_cdp_session(page)
            await cdp.send("Network.enable")
            rate = network[0] * 1e6 / 8  # bytes per second
            await cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": network[1],
                                                                 "downloadThroughput": rate, "uploadThroughput": rate})
            cdp.on("Network.loadingFinished", lambda event: wire.append(event["encodedDataLength"]))
        await page.goto(url, timeout=TIMEOUT_MS)
        await page.wait_for_selector("h1", timeout=TIMEOUT_MS)
        await page.wait_for_function("() => performance.getEntriesByName('first-contentful-paint').length > 0",
                                     timeout=TIMEOUT_MS)
        steps = await page.evaluate(READ)
        steps["title"] = steps["first_paint"] if await page.evaluate(SHELL) else steps["heading"]
        if network is not None:
            await page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                         timeout=TIMEOUT_MS)
            await page.wait_for_timeout(500)  # the scripts the page asks for as it draws
            steps["wire_mb"] = sum(wire) / 1e6
        return steps
    finally:
        await context.close()


def medians(loads: list[dict[str, float]]) -> dict[str, float]:
    return {step: statistics.median(row[step] for row in loads if row.get(step) is not None)
            for step in (*STEPS, "wire_mb") if any(row.get(step) is not None for row in loads)}


async def measure(guide_url: str, bare_url: str, slugs: list[str] | None, loads: int,
                  network: tuple[float, float] | None = None) -> dict[str, dict]:
    from playwright.async_api import async_playwright

    pages = {"bare Streamlit": bare_url}
    pages.update({f"/{c.slug}" if c.slug else "/ (home)": f"{guide_url}/{c.slug}?lang=en" for c in chapters.CHAPTERS
                  if not slugs or (c.slug or "home") in slugs})
    found: dict[str, list] = {name: [] for name in pages}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for url in (bare_url, f"{guide_url}/?lang=en"):
            await load(browser, url)  # warm both servers' imports
        for _ in range(loads):  # in turns: the machine's load moves between rounds, not within
            for name, url in pages.items():
                found[name].append(await load(browser, url, network))
        await browser.close()
    return {name: medians(rows) for name, rows in found.items()}


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench first_heading")
    parser.add_argument("--loads", type=int, default=5, help="loads of each page")
    parser.add_argument("--slug", nargs="*", help="only these chapters (home for the home page)")
    parser.add_argument("--network", type=float, help="load over an emulated network of this many Mbit/s")
    parser.add_argument("--rtt", type=float, default=40.0, help="that network's round trip, in ms")
    args = parser.parse_args(options or [])
    network = (args.network, args.rtt) if args.network else None
    server = GuideServer().wait()
    with tempfile.TemporaryDirectory() as folder:
        bare = start_bare(Path(folder))
        try:
            rows = asyncio.run(measure(server.url, bare.url, args.slug, args.loads, network))
        finally:
            server.stop()
            bare.stop()
    over = f", over {args.network:g} Mbit/s and {args.rtt:g} ms round trip" if network else ""
    print(f"\nFirst heading, median of {args.loads} fresh loads each, ms from navigation start (Chromium{over})\n")
    columns = [*STEPS, *(["wire_mb"] if network else [])]
    print("| page | " + " | ".join(columns).replace("wire_mb", "MB on the wire") + " |")
    print("|" + "---|" * (len(columns) + 1))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[step]:.2f}" if step == "wire_mb" else f"{row[step]:.0f}"
                                         for step in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
