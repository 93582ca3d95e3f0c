"""Speed of the quantization, parallelism and offloading calculators on the largest catalog
models (what one widget rerun costs), and the offload planner cold and warm.
Run: python -m bench big_models"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COLD_PLAN = """
import time
t = time.perf_counter()
from calculator.models import catalog
from calculator.distributed.offload import build_meta_model, plan_device_map
model = build_meta_model(catalog.config({key!r}), "bfloat16")
built = time.perf_counter() - t
t = time.perf_counter()
plan_device_map(model, [80 * 2**30] * 4, 512 * 2**30, "bfloat16")
print(built, time.perf_counter() - t)
"""


def median_ms(function, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from calculator.models import catalog
    from calculator.distributed.parallel import pipeline_schedule, pipeline_split, tensor_parallel
    from calculator.memory.quantization import quantize_all

    rows = []
    for key in ("llama-3.1-405b", "deepseek-v3"):
        summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
        rows.append((f"every quantization format, {key}", median_ms(lambda: quantize_all(summary, spec))))
        rows.append((f"pipeline split over 16 GPUs, {key}", median_ms(lambda: pipeline_split(summary, "bfloat16", 16))))
        rows.append((f"tensor parallelism, degree 8, {key}", median_ms(lambda: tensor_parallel(summary, spec, "bfloat16", 8))))
    rows.append(("pipeline schedule, 16 stages x 32 micro-batches (1F1B)", median_ms(lambda: pipeline_schedule(16, 32, "1F1B"))))
    for key in ("llama-3.1-70b", "llama-3.1-405b"):
        out = subprocess.run([sys.executable, "-c", COLD_PLAN.format(key=key)], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
        rows.append((f"offload: build {key} on meta, cold process (imports included)", float(out[0]) * 1000))
        rows.append(("offload: accelerate's device map for it, 4 GPUs + CPU", float(out[1]) * 1000))
    print("| measurement | time |\n|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} ms |")


if __name__ == "__main__":
    main()
