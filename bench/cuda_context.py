"""The memory a PyTorch process holds outside its caching allocator (its CUDA context, the kernels
it loaded, libraries' workspaces), read from published out-of-memory messages
(bench/data/oom_messages.json): in use − allocated − reserved but unallocated, for messages that
say what this process uses. Only single-script runs count (a rank of a multi-GPU job also holds
NCCL buffers; a serving engine, its own allocations). Grouped by architecture and by the PyTorch
generation the wording shows; `python -m bench cuda_context` prints the table docs/benchmarks.md shows,
and calculator/core/cuda_context.py holds the same figures (a test keeps the three equal)."""

from __future__ import annotations

from calculator.core.units import MIB
import json
from pathlib import Path
import statistics

DATA = Path(__file__).resolve().parent / "data" / "oom_messages.json"


def messages() -> list[dict]:
    with open(DATA, encoding="utf-8") as handle:
        return json.load(handle)["messages"]


def readings() -> list[tuple[dict, int, str]]:
    """(row, bytes outside PyTorch in this process, generation) of every usable message."""
    from calculator.memory.oom_message import parse

    found = []
    for row in messages():
        report = parse(row["message"])
        outside = report.this_process_outside_pytorch if report else None
        if outside is not None and row["setting"] == "single":
            found.append((row, outside, report.generation))
    return found


def summary(values: list[int]) -> tuple[int, int, int, int, int, int]:
    """(messages, median, lower quartile, upper quartile, smallest, largest), in bytes."""
    values = sorted(values)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return len(values), round(statistics.median(values)), round(q1), round(q3), values[0], values[-1]


def table() -> dict[str, tuple[int, int, int, int, int, int]]:
    """By architecture (messages whose card is known), and "all" (every single-script message)."""
    groups: dict[str, list[int]] = {}
    for row, outside, _ in readings():
        groups.setdefault(row["architecture"] or "unknown", []).append(outside)
        groups.setdefault("all", []).append(outside)
    groups.pop("unknown", None)
    return {name: summary(values) for name, values in sorted(groups.items())}


def by_generation() -> dict[tuple[str, str], tuple[int, int, int, int, int, int]]:
    groups: dict[tuple[str, str], list[int]] = {}
    for row, outside, generation in readings():
        for name in (row["architecture"] or "unknown", "all"):
            groups.setdefault((name, generation), []).append(outside)
    return {key: summary(values) for key, values in sorted(groups.items()) if key[0] != "unknown"}


def _mib(size: int) -> str:
    return f"{size / MIB:,.0f}"


def markdown() -> str:
    """docs/benchmarks.md's table: one row per architecture and generation, then each architecture."""
    lines = ["| architecture | PyTorch | messages | median (MiB) | quartiles (MiB) | range (MiB) |",
             "|---|---|---:|---:|---:|---:|"]
    rows = [((name, generation), s) for (name, generation), s in by_generation().items()]
    rows += [((name, "2.1+"), s) for name, s in table().items()]
    for (name, generation), (n, median, q1, q3, low, high) in rows:
        lines.append(f"| {name} | {generation} | {n} | {_mib(median)} | {_mib(q1)} – {_mib(q3)} | "
                     f"{_mib(low)} – {_mib(high)} |")
    return "\n".join(lines)


def main() -> None:
    total = len(messages())
    print(f"{total} published out-of-memory messages, {len(readings())} single-script readings of the memory "
          "outside PyTorch (in use − allocated − reserved but unallocated):\n")
    print(markdown())
