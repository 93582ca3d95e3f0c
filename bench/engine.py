"""Engine speed: counting a 70B config cold and cached, a catalog lookup, and the CLI beside
accelerate's own path (init_empty_weights + from_config + calculate_maximum_sizes) on the
same config, in the same run. Run: python -m bench engine"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "calculator" / "models" / "catalog" / "configs" / "llama-2-70b.json"

COLD_COUNT = """
import time, json
t = time.perf_counter()
from calculator.models.seam import resolve_config
config = json.load(open({path!r}))
s = resolve_config(config, "70b").summary
cold = time.perf_counter() - t
t = time.perf_counter()
resolve_config(config, "70b")
print(cold, time.perf_counter() - t, s.parameters)
"""

ACCELERATE_PATH = """
import json, torch, transformers
from accelerate import init_empty_weights
from accelerate.utils import calculate_maximum_sizes
config = transformers.AutoConfig.for_model(**json.load(open({path!r})))
with init_empty_weights():
    model = transformers.AutoModel.from_config(config, dtype=torch.float32)
total, largest = calculate_maximum_sizes(model)
print(total)
"""


def _wall(*cmds: list[str], repeat: int = 5) -> list[float]:
    """Median wall time of each command, run alternately so machine load hits all alike."""
    times: list[list[float]] = [[] for _ in cmds]
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def _in_process_catalog() -> tuple[float, float]:
    """First answer in a process whose modules are imported (the app's case), then warm."""
    code = ("import time; from calculator.memory.estimate import estimate; t=time.perf_counter(); "
            "estimate('llama-2-70b'); a=time.perf_counter()-t; t=time.perf_counter(); "
            "[estimate('llama-2-70b') for _ in range(100)]; print(a, (time.perf_counter()-t)/100)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    first, warm = map(float, out.stdout.split())
    return first, warm


def main() -> None:
    out = subprocess.run([sys.executable, "-c", COLD_COUNT.format(path=str(CONFIG))], cwd=ROOT,
                         check=True, capture_output=True, text=True)
    cold, cached, _ = out.stdout.split()
    first, warm = _in_process_catalog()
    ours, theirs, ours_catalog = _wall(
        [sys.executable, "-m", "calculator", "estimate", str(CONFIG), "--json"],
        [sys.executable, "-c", ACCELERATE_PATH.format(path=str(CONFIG))],
        [sys.executable, "-m", "calculator", "estimate", "llama-2-70b", "--json"],
    )
    rows = [
        ("count a 70B config (Llama-2-70b), cold, in process (imports included)", float(cold)),
        ("same config again (cached)", float(cached)),
        ("catalog lookup, first answer (modules already imported, as in the app)", first),
        ("catalog lookup, warm (cached)", warm),
        ("CLI `estimate <70B config.json>` wall time", ours),
        ("accelerate path on the same config, wall time", theirs),
        ("CLI `estimate llama-2-70b` (catalog) wall time", ours_catalog),
    ]
    print("| measurement | time |\n|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds * 1000:.1f} ms |" if seconds < 1 else f"| {label} | {seconds:.2f} s |")
    print(json.dumps({label: seconds for label, seconds in rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
