"""`accuracy`: how close the estimates came to measured memory (the result files of
bench/accuracy.py)."""

from __future__ import annotations

from pathlib import Path

from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, print_json, render_table


def register(commands, shared) -> None:
    p = add_command(commands, "accuracy", shared, ("json",), run,
                    help="how close the estimates came to measured memory (bench/results)")
    p.add_argument("--rows", action="store_true", help="every measurement, not only the summary per kind")
    p.add_argument("--results", default=RESULTS_DIR, metavar="DIR",  # a str: an empty one is refused, not "."
                   help="the folder of result files (default: bench/results of this checkout)")


# Where bench/accuracy.py writes (the engine reads whatever folder it is given).
RESULTS_DIR = Path(__file__).resolve().parents[3] / "bench" / "results"


def run(args) -> int:
    from calculator.answers.accuracy import latest_runs, summarize

    from calculator.core.errors import CalculatorError

    results = Path(args.results)
    try:
        folder = results.is_dir()
    except (OSError, ValueError):
        folder = False
    if not folder:
        raise CalculatorError("results_folder_missing", path=str(args.results)[:80])
    runs = latest_runs(results)
    if args.json:
        print_json({"runs": [{"file": run.path.name, "started": run.started, "complete": run.complete,
                               "device": run.device, "versions": run.versions,
                               "summary": [s.__dict__ for s in summarize(run.rows)],
                               "rows": [r.__dict__ for r in run.rows]} for run in runs]})
        return 0
    if not runs:
        print("No result file yet: run python -m bench.accuracy to measure.")
        return 0
    for run in runs:
        device = run.device
        print(f"{device['type'].upper()}: {device.get('name', '?')}, {run.started}, "
              + ", ".join(f"{k} {v}" for k, v in run.versions.items()) + f" ({run.path.name})")
        if device.get("cuda_context_bytes"):
            print(f"CUDA context, outside PyTorch's allocator and not in the figures: "
                  f"{format_bytes(device['cuda_context_bytes'])}")
        print(render_table(["kind", "target", "rows", "within target", "median |error|", "largest |error|"],
                           [[s.kind, f"{s.target:.1%}", str(s.cases), str(s.within), f"{s.median_abs_error:.2%}",
                             f"{s.largest_abs_error:.2%}"] for s in summarize(run.rows)]))
        if args.rows:
            print(render_table(["kind", "model", "settings", "split", "measured", "predicted", "error", ""],
                               [[r.kind, r.model, " ".join(f"{k}={v}" for k, v in r.settings.items()
                                                           if k not in ("device", "double_quant",
                                                                        "gradient_accumulation")),
                                 r.split, format_bytes(r.measured_bytes), format_bytes(r.predicted_bytes),
                                 f"{r.error:+.2%}", "" if r.within_target else "MISSED"] for r in run.rows]))
        print()
    print("Errors are predicted / measured - 1. Units: GiB = 2^30 bytes.")
    return 0
