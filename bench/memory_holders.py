"""What a chapter's server process holds after many distinct models: the chapter's page rerun
in one process (Streamlit's AppTest, one session) on `--models` distinct Hub ids of the stand-in
Hub (tests/hub_server.py, the same small configs as memory_curve), and the Python allocations
that grew from the `--start`th model to the last (tracemalloc), summed by who holds them: the
engine's answers kept by their inputs (calculator/core/memo.py), the model seam's caches, the
kept plotly figures, the rest. The process is slower than a server (tracemalloc traces every
allocation); its figures are Python's allocations, not the resident size memory_curve reads.

Run: python -m bench memory_holders [--chapter slow-model] [--models 40] [--start 10]
"""

from __future__ import annotations

import argparse
from collections import Counter
import gc
import os
from pathlib import Path
import tracemalloc

ROOT = Path(__file__).resolve().parent.parent
HOLDERS = (("calculator/core/memo.py", "engine answers kept by inputs"),
           ("calculator/models/seam.py", "model seam caches"), ("calculator/models/builder.py", "model seam caches"),
           ("guide/charts.py", "kept figures"), ("plotly", "kept figures"))


def holder(frames: list[str]) -> str:
    """Who holds an allocation, from its traceback's file names (the first holder found wins)."""
    for needle, name in HOLDERS:
        if any(needle in frame for frame in frames):
            return name
    return "other"


def held_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> Counter:
    """Bytes that grew between two snapshots, by holder."""
    grown: Counter = Counter()
    for stat in after.compare_to(before, "traceback"):
        grown[holder([frame.filename for frame in stat.traceback])] += stat.size_diff
    return grown


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench memory_holders")
    parser.add_argument("--chapter", default="slow-model")
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--start", type=int, default=10)
    args = parser.parse_args(argv)
    from bench.memory_curve import distinct_config
    from tests.hub_server import FakeHub

    hub = FakeHub()
    hub.start()
    for index in range(1, args.models + 1):
        hub.add(f"holders/m-{index}", {"config.json": distinct_config(9, index, upload=False)})
    os.environ["HF_ENDPOINT"] = hub.url
    from streamlit.testing.v1 import AppTest

    from guide import chapters

    app = AppTest.from_file(str(ROOT / "Home.py"), default_timeout=600)
    app.query_params.update({"lang": "en", "model": "holders/m-1"})
    app.context = {"url": f"http://localhost:8501/{args.chapter}"}
    app.run()
    app.switch_page(chapters.by_slug(args.chapter).page)
    app.run()
    tracemalloc.start(12)
    before = None
    try:
        for index in range(2, args.models + 1):
            app.query_params["model"] = f"holders/m-{index}"
            app.run()
            if index == args.start:
                gc.collect()
                before = tracemalloc.take_snapshot()
        gc.collect()
        grown = held_growth(before, tracemalloc.take_snapshot())
    finally:
        hub.stop()
    print(f"{args.chapter}: Python allocations grown from model {args.start} to {args.models}, KiB")
    for name, size in grown.most_common():
        print(f"  {name}: {size / 1024:.0f}")
    print(f"  in all: {sum(grown.values()) / 1024:.0f}")


if __name__ == "__main__":
    main()
