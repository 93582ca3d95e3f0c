"""A process and its descendants, read from /proc (Linux): the server's build workers are
forked by its worker template, so they are its grandchildren, and they share most of their
pages with the template. Resident sizes (RSS) count a shared page in every process that maps
it; proportional sizes (PSS) split it between them, so a tree's PSS adds up to what it
really holds."""

from __future__ import annotations

from pathlib import Path

from calculator.models.build_worker import resident_bytes  # /proc/<pid>/statm, as the build pool reads it


def children(pid: int) -> list[int]:
    """Every child of `pid`: each thread lists its own (the server starts processes from its
    script threads, not the main one)."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def descendants(pid: int) -> list[int]:
    found, queue = [], children(pid)
    while queue:
        child = queue.pop()
        found.append(child)
        queue += children(child)
    return found


def proportional_bytes(pid: int) -> int:
    """The process's share of the pages it maps (Pss); 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def tree_bytes(pid: int) -> tuple[int, int]:
    """The process's resident bytes, and what it and all its descendants hold together (PSS)."""
    return resident_bytes(pid), sum(proportional_bytes(p) for p in [pid, *descendants(pid)])
