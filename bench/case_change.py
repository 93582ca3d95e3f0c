"""Where a case change's time goes on one chapter, without a browser: the chapter
is opened with AppTest, then the case bar's batch is changed several times; each rerun is timed
whole and under cProfile, its own time split by where the code lives (the engine in calculator/,
figures in plotly, Streamlit itself, the guide's UI layer, the rest), with each widget's time
and the number of elements the page sends.

    python -m bench case_change [--slug oom] [--runs 5]    (--slug "" for the home page)

The change goes to the case's batch, or its users, or its GPU (the first the bar shows).
CPU time (the process's, all threads) is given beside the wall time: on a shared machine it
moves less.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import statistics
import time

PLACES = (("engine (calculator/)", "/calculator/"), ("figures (plotly)", "/plotly/"),
          ("streamlit", "/streamlit/"), ("guide UI (guide/)", "/guide/"), ("torch / transformers", "/torch/"),
          ("torch / transformers", "/transformers/"))


def _place(filename: str) -> str:
    return next((name for name, part in PLACES if part in filename), "other")


def _split(profile: cProfile.Profile) -> dict[str, float]:
    """Seconds of each function's own time (not its callees'), summed by where it lives."""
    split: dict[str, float] = {}
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(profile).stats.items():
        split[_place(filename)] = split.get(_place(filename), 0.0) + own
    return split


def _elements(at) -> int:
    count, stack = 0, [at._tree]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(getattr(node, "children", {}).values())
    return count


def _instrument(times: dict[str, list[float]], profiles: list):
    """Time each widget and profile each page run, in the thread that runs the script
    (AppTest runs it in its own thread, out of reach of a profiler started here)."""
    import guide.render as render

    original, original_page = render.render_widget, render.render_page

    def profiled(slug):
        profile = cProfile.Profile()
        profile.enable()
        try:
            return original_page(slug)
        finally:
            profile.disable()
            profiles.append(profile)

    def timed(name, ctx):
        start = time.perf_counter()
        try:
            return original(name, ctx)
        finally:
            times.setdefault(name, []).append(time.perf_counter() - start)
    render.render_widget = timed
    return original, original_page, profiled


def _change(at, step: int) -> None:
    """The case's batch when the chapter's bar has one, else its users, else its GPU."""
    if any(w.key == "case_batch" for w in at.number_input):
        at.number_input(key="case_batch").set_value(1 + step).run()
    elif any(w.key == "case_users" for w in at.number_input):
        at.number_input(key="case_users").set_value(1 + step).run()
    else:
        at.selectbox(key="case_gpu").set_value(("l4", "h100", "rtx3090", "a100-80gb")[step % 4]).run()


def measure(slug: str = "oom", runs: int = 5) -> dict:
    from tests.apptest import open_page
    import guide.render as render

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)  # bare-mode warnings of the profiler's thread
    at = open_page(slug, lang="en")
    widget_times: dict[str, list[float]] = {}
    profiles: list = []
    originals = _instrument(widget_times, profiles)
    totals, cpu, splits = [], [], []
    try:
        for run in range(2 * runs):  # timed runs first (no profiler), then profiled ones
            profiling = run >= runs
            if profiling:
                render.render_page = originals[2]
            start, start_cpu = time.perf_counter(), time.process_time()
            _change(at, 2 + run)
            if profiling:
                splits.append(_split(profiles[-1]))
            else:
                totals.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
    finally:
        render.render_widget, render.render_page = originals[:2]
    places = sorted({p for s in splits for p in s}, key=lambda p: -statistics.median(s.get(p, 0) for s in splits))
    return {"slug": slug, "runs": runs, "median_s": statistics.median(totals), "cpu_s": statistics.median(cpu),
            "split_s": {p: statistics.median(s.get(p, 0.0) for s in splits) for p in places},
            "widgets_s": {name: statistics.median(ts) for name, ts in widget_times.items()},
            "elements": _elements(at)}


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench case_change")
    parser.add_argument("--slug", default="oom")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(options or [])
    result = measure(args.slug, args.runs)
    print(f"{result['slug'] or 'home'}: a case change reruns in {result['median_s']:.2f} s (median of {result['runs']},"
          f" AppTest; {result['cpu_s']:.2f} s of CPU); {result['elements']} elements on the page")
    print("own time by place, under cProfile (which slows it; median, s):")
    for place, seconds in result["split_s"].items():
        print(f"  {place:<24} {seconds:6.3f}")
    print("each widget, whole (median of all runs, s):")
    for name, seconds in sorted(result["widgets_s"].items(), key=lambda item: -item[1]):
        print(f"  {name:<24} {seconds:6.3f}")


if __name__ == "__main__":
    main()
