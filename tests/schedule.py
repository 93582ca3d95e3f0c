"""The order test files run in: the longest first, so that the two workers of `make test`
(`pytest -n 2 --dist loadfile --no-loadscope-reorder`) finish together instead of one of them
running the last long browser file alone. xdist's own reorder sorts files by their number of
tests, which puts the browser files (few tests, each slow) last.

The seconds per file come from a recorded run (`tests/file_seconds.json`):
    TEST_SECONDS_LOG=/tmp/seconds.tsv .venv/bin/python -m pytest -n 2 --dist loadfile
    .venv/bin/python -m tests.schedule /tmp/seconds.tsv      # rewrites tests/file_seconds.json
A file not in the table counts as a median one. Only the order changes: every test still runs."""

from __future__ import annotations

from collections import defaultdict
import json
import os
from pathlib import Path
import statistics
import sys

SECONDS = Path(__file__).resolve().parent / "file_seconds.json"
LOG_ENV = "TEST_SECONDS_LOG"


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load_seconds(path: Path = SECONDS) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_files_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The positions of `nodeids` reordered: files by recorded seconds, longest first (a file
    missing from the table counts as the median file); within a file, the original order."""
    default = statistics.median(seconds.values()) if seconds else 0.0
    first_seen: dict[str, int] = {}
    for nodeid in nodeids:
        first_seen.setdefault(file_of(nodeid), len(first_seen))

    def key(position: int):
        name = file_of(nodeids[position])
        return (-seconds.get(name, default), first_seen[name], position)

    return sorted(range(len(nodeids)), key=key)


def record_line(nodeid: str, when: str, outcome: str, duration: float) -> str:
    return f"{nodeid}\t{when}\t{outcome}\t{duration:.3f}\n"


def seconds_per_file(lines) -> dict[str, float]:
    """Sum the setup, call and teardown seconds of each file from a recorded log."""
    totals: dict[str, float] = defaultdict(float)
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4:
            try:
                totals[file_of(parts[0])] += float(parts[3])
            except ValueError:
                continue
    return {name: round(total, 1) for name, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.schedule RECORDED_LOG", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as log:
        totals = seconds_per_file(log)
    SECONDS.write_text(json.dumps(totals, indent=1) + "\n")
    print(f"{len(totals)} files, {sum(totals.values()):.0f} s in all; the longest: "
          + ", ".join(f"{name} {value:.0f} s" for name, value in list(totals.items())[:5]))
    return 0


def recording_to() -> str | None:
    return os.environ.get(LOG_ENV) or None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
