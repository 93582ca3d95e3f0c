"""What the resting size is made of: the server process and a warm build worker, import by
import, and what the engine's caches hold when full.

Each ladder runs in a fresh interpreter (the venv's python) that imports one group of
modules after another and reads its own resident size (/proc/self/status, VmRSS) after each:
the difference is what that group added. The server's ladder follows what `streamlit run
Home.py` loads before a reader's first page (Streamlit, its web server, the guide's frame) and
then what the chapters' pages load (the engine, the widgets, plotly). The worker's ladder is
calculator/models/build_worker.py's: torch, transformers, the warm-up build, then one
7B-class model built on the meta device.

The caches: the model seam's count and Hub caches and the offloading plans are bounded in
entries and in bytes; their bytes when full of ordinary configs and at their byte bound come
from filling them here (builds run in the build workers, as on the server).

Run: python -m bench resting_memory
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20

SERVER_STEPS = [
    ("python", ""),
    ("streamlit", "import streamlit"),
    ("Streamlit's web server (starlette, uvicorn)", "import streamlit.web.bootstrap, streamlit.web.server.starlette.starlette_server"),
    ("the guide's frame (router, chapters, texts, case bar)", "import guide.http, guide.app, guide.render, guide.case_bar"),
    ("the engine (answers, memory, serving, training)", "import calculator.answers, calculator.answers.verdicts, calculator.serving, calculator.training"),
    ("plotly", "import plotly.graph_objects"),
    ("every chapter's widgets", "import pkgutil, importlib, guide.widgets\n"
                                "for m in pkgutil.iter_modules(guide.widgets.__path__): "
                                "importlib.import_module('guide.widgets.' + m.name)"),
    ("huggingface_hub and its HTTP client (the first Hub id a reader names)",
     "from huggingface_hub import hf_hub_url; from huggingface_hub.utils import build_hf_headers, get_session"),
    ("pandas and pyarrow, a table sent as Arrow (st.dataframe)",
     "import pandas, streamlit.dataframe_util as d; d.convert_anything_to_arrow_bytes(pandas.DataFrame({'a': [1.0]}))"),
    ("a plotly figure built and sent as JSON (guide/charts.py: its validators load on first use)",
     "import plotly.io; f = plotly.graph_objects.Figure([plotly.graph_objects.Bar(x=[1], y=[2]),"
     " plotly.graph_objects.Scatter(x=[1], y=[2])]); f.update_layout(title='t', xaxis_title='x', shapes=[dict("
     "type='line', x0=0, x1=1, y0=0, y1=1)]); plotly.io.to_json(f, validate=False)"),
]

WORKER_STEPS = [
    ("python", ""),
    ("torch", "import torch"),
    ("transformers", "import transformers"),
    ("the warm-up build (gpt2, 1 layer, on the meta device)", "from calculator.models import build_worker; build_worker._warm_up()"),
    ("a 7B model built on the meta device (Mistral-7B's config)",
     "import json; from calculator.models import meta\n"
     "meta.count(json.load(open('calculator/models/catalog/configs/mistral-7b-v0.1.json')))"),
    ("100 distinct small configs built after it",
     "from bench.memory_curve import distinct_config\n"
     "for i in range(100): meta.count(distinct_config(0, i, False))"),
]

LADDER = """
import json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
steps = json.loads(sys.argv[1])
readings = []
for name, code in steps:
    exec(code, globals())
    readings.append([name, rss()])
print(json.dumps(readings))
"""


def ladder(steps: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """(step, resident bytes after it) in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", LADDER, json.dumps(steps)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                                        "PATH": "/usr/bin:/bin"})
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return [tuple(row) for row in json.loads(done.stdout.splitlines()[-1])]


def _held(fill) -> int:
    """Python heap bytes `fill()` leaves allocated (tracemalloc): what a cache holds once full."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    fill()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held


def cache_fill() -> list[tuple[str, str, int]]:
    """(cache, its bound, heap bytes it holds when full of ordinary answers): each is filled
    here past its entry bound with distinct answers as large as a real reader's (an 8B model's
    count, a Hub config, an offload plan of an 8B model), each its own copy."""
    import pickle

    from calculator.distributed import offload_plan
    from calculator.models import catalog, seam

    config = catalog.config("llama-3.1-8b")
    answer = (catalog.stored_summary("llama-3.1-8b", "auto"), catalog.stored_spec("llama-3.1-8b"))
    copy = lambda value: pickle.loads(pickle.dumps(value))  # noqa: E731  (distinct objects, as built apart)

    def counts() -> None:
        for i in range(seam.COUNT_CACHE_ENTRIES + 8):
            key = (json.dumps({**config, "vocab_size": 128_256 + i}, sort_keys=True), "auto")
            seam._counts.get(key, lambda: copy(answer))

    def hub() -> None:
        for i in range(seam.HUB_CACHE_ENTRIES + 8):
            seam._hub_answers.get(("config", "", f"someone/model-{i}"), lambda i=i: {**copy(config), "vocab_size": i})

    plan, _ = offload_plan.plan_here(json.dumps(config, sort_keys=True), [8 * 2**30], None, "bfloat16", "none")
    offload_plan._plans = seam._BoundedCache(offload_plan.PLAN_CACHE_ENTRIES, offload_plan.PLAN_CACHE_BYTES)

    def plans() -> None:
        for i in range(offload_plan.PLAN_CACHE_ENTRIES + 8):
            offload_plan._plans.get(("c", (i,), None, "bfloat16", "none"), lambda: (copy(plan), "LlamaForCausalLM"))

    def catalog_models() -> None:
        for entry in catalog.entries():
            seam.catalog_model(entry.key)

    return [
        ("model counts (`seam._counts`)", f"{seam.COUNT_CACHE_ENTRIES} entries, {seam.COUNT_CACHE_BYTES // MiB} MiB",
         _held(counts)),
        ("Hub configs and headers (`seam._hub_answers`, 300 s)",
         f"{seam.HUB_CACHE_ENTRIES} entries, {seam.HUB_CACHE_BYTES // MiB} MiB", _held(hub)),
        ("offload plans (`offload_plan._plans`)",
         f"{offload_plan.PLAN_CACHE_ENTRIES} entries, {offload_plan.PLAN_CACHE_BYTES // MiB} MiB", _held(plans)),
        ("catalog models (`seam.catalog_model`)", f"64 entries ({len(catalog.entries())} in the catalog)",
         _held(catalog_models)),
    ]


def main() -> None:
    for title, steps in (("server process", SERVER_STEPS), ("build worker", WORKER_STEPS)):
        readings = ladder(steps)
        print(f"\n{title}\n\n| step | resident after | added |\n|---|---|---|")
        previous = 0
        for name, rss in readings:
            print(f"| {name} | {rss / MiB:.0f} MiB | {(rss - previous) / MiB:+.0f} MiB |")
            previous = rss
    print("\n| cache (server process) | bound (entries, pickled bytes) | held when full of ordinary answers |\n"
          "|---|---|---|")
    for name, bound, held in cache_fill():
        print(f"| {name} | {bound} | {held / MiB:.1f} MiB |")


if __name__ == "__main__":
    main()
