"""Read a CUDA out-of-memory message: its figures, and the likely cause.

PyTorch has written two formats. Up to 2.0, one parenthesis:
  "Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated;
   3.44 MiB free; 14.80 GiB reserved in total by PyTorch)"   (1.x said "cached", not "reserved")
Since 2.1, sentences (c10/cuda/CUDACachingAllocator.cpp):
  "Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is
   free. Process 2441 has 77.94 GiB memory in use. [or: Including non-PyTorch memory, this
   process has ... memory in use.] Of the allocated memory 75.68 GiB is allocated by PyTorch,
   [with X allocated in private pools (e.g., CUDA Graphs),] and 1.74 GiB is reserved by
   PyTorch but unallocated."
Sizes are PyTorch's format_size: "N bytes", then KiB, MiB, GiB with two decimals. ROCm says
"HIP out of memory" with the same sentences. The text is whatever a user pasted: it is read
with bounded patterns, never evaluated, and anything unexpected reads as "not recognised".
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re

MAX_CHARS = 20_000  # a traceback's tail holds the message; no one pastes more by need

_SIZE = r"(\d{1,7}(?:[.,]\d{1,4})?)\s{0,3}(bytes|byte|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|kB)"
_UNITS = {"bytes": 1, "byte": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
          "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}

_REQUEST = re.compile(r"Tried to allocate " + _SIZE)
_LEGACY = re.compile(
    r"\(\s{0,3}(GPU\s{0,3}\d{0,3})\s{0,3};\s{0,3}" + _SIZE + r" total capacity;\s{0,3}" + _SIZE
    + r" already allocated;(?:\s{0,3}" + _SIZE + r" free;)?\s{0,3}" + _SIZE
    + r" (?:reserved in total by PyTorch|cached)")
_TOTAL = re.compile(r"(GPU\s{0,3}\d{0,3}) has a total capac\w{0,4} of " + _SIZE + r" of which " + _SIZE + r" is free")
_PROCESS = re.compile(r"Process (\d{1,10}) has " + _SIZE + r" memory in use")
_THIS_PROCESS = re.compile(r"Including non-PyTorch memory, this process has " + _SIZE + r" memory in use")
_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
_PRIVATE = re.compile(r"with " + _SIZE + r" allocated in private pools")
_UNALLOCATED = re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated")
_MENTIONS_OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY", re.IGNORECASE)

GIB = 2**30


def _bytes(number: str, unit: str) -> int:
    return round(float(number.replace(",", ".")) * _UNITS[unit])


@dataclass(frozen=True)
class OomReport:
    """The figures of one message, in bytes. None: the message does not say."""

    style: str  # "legacy" (PyTorch 2.0 and before) or "current" (2.1 and after)
    device: str
    requested: int
    total: int
    free: int | None
    allocated: int  # by PyTorch's tensors (private pools included)
    reserved: int  # held by PyTorch's caching allocator, used or not
    process_in_use: int | None = None  # this process, PyTorch or not ("Including non-PyTorch memory")
    processes: tuple[tuple[int, int], ...] = field(default_factory=tuple)  # (pid, bytes) NVML listed
    private_pools: int = 0

    @property
    def reserved_unallocated(self) -> int:
        return max(self.reserved - self.allocated, 0)

    @property
    def outside_pytorch(self) -> int | None:
        """GPU memory neither free nor held by this PyTorch: CUDA contexts, other libraries,
        other processes."""
        if self.free is None:
            return None
        return max(self.total - self.free - self.reserved, 0)

    @property
    def other_processes(self) -> int | None:
        """Memory other processes hold, when the message lists them: every listed process but
        this one (the one whose use best covers what PyTorch reserved here)."""
        if not self.processes:
            return None
        sizes = [size for _, size in self.processes]
        if self.process_in_use is not None:
            return sum(sizes)  # "this process" is written apart; the listed ones are others
        candidates = [s for s in sizes if s >= self.reserved] or [max(sizes)]
        own = min(candidates)
        return sum(sizes) - own

    @property
    def this_process_outside_pytorch(self) -> int | None:
        if self.process_in_use is None:
            return None
        return max(self.process_in_use - self.reserved, 0)


@dataclass(frozen=True)
class Cause:
    code: str  # key of the explanation in the UI catalog: oom_message.cause_<code>
    params: dict[str, int] = field(default_factory=dict)  # sizes in bytes


@dataclass(frozen=True)
class Reading:
    report: OomReport | None
    causes: tuple[Cause, ...]
    mentions_oom: bool  # an out-of-memory message without figures we can read


def parse(text: object) -> OomReport | None:
    """The figures of the last out-of-memory message in `text`, or None."""
    if not isinstance(text, str):
        return None
    text = " ".join(text[-MAX_CHARS:].split())  # wrapped lines and indentation do not matter
    requests = list(_REQUEST.finditer(text))
    if not requests:
        return None
    request = requests[-1]
    rest = text[request.end(): request.end() + 2_000]
    requested = _bytes(*request.groups())
    legacy = _LEGACY.search(rest)
    if legacy:
        g = legacy.groups()
        device, total, allocated = g[0], _bytes(g[1], g[2]), _bytes(g[3], g[4])
        free = _bytes(g[5], g[6]) if g[5] is not None else None
        return OomReport("legacy", _device(device), requested, total, free, allocated, _bytes(g[7], g[8]))
    total_match = _TOTAL.search(rest)
    allocated_match = _ALLOCATED.search(rest)
    unallocated_match = _UNALLOCATED.search(rest)
    if not (total_match and allocated_match and unallocated_match):
        return None
    allocated = _bytes(*allocated_match.groups())
    this = _THIS_PROCESS.search(rest)
    private = _PRIVATE.search(rest)
    return OomReport(
        "current", _device(total_match.group(1)), requested, _bytes(*total_match.group(2, 3)),
        _bytes(*total_match.group(4, 5)), allocated, allocated + _bytes(*unallocated_match.groups()),
        process_in_use=_bytes(*this.groups()) if this else None,
        processes=tuple((int(m.group(1)), _bytes(m.group(2), m.group(3))) for m in _PROCESS.finditer(rest)),
        private_pools=_bytes(*private.groups()) if private else 0)


def _device(text: str) -> str:
    return " ".join(text.split())


def diagnose(report: OomReport) -> tuple[Cause, ...]:
    """The likely causes, most telling first. Thresholds are about what matters, not tuned:
    memory that could have held the request, or a twentieth of the card."""
    causes: list[Cause] = []
    notable = max(report.requested, report.total // 20)
    if report.reserved_unallocated >= report.requested:
        code = "fragmentation_current" if report.style == "current" else "fragmentation_legacy"
        causes.append(Cause(code, {"unallocated": report.reserved_unallocated, "requested": report.requested}))
    others = report.other_processes
    if others is not None and others >= notable:
        causes.append(Cause("other_process", {"others": others}))
    inside = report.this_process_outside_pytorch
    if inside is not None and inside >= max(notable, GIB):
        causes.append(Cause("outside_pytorch_here", {"outside": inside}))
    outside = report.outside_pytorch
    if others is None and inside is None and outside is not None and outside >= max(notable, GIB):
        causes.append(Cause("outside_pytorch", {"outside": outside}))
    if report.private_pools >= notable:
        causes.append(Cause("private_pools", {"pools": report.private_pools}))
    if report.requested >= report.total // 4:
        causes.append(Cause("huge_request", {"requested": report.requested, "total": report.total}))
    available = report.total - (outside or 0)
    if report.allocated + report.requested > available or not causes:
        causes.append(Cause("real_overflow", {"needed": report.allocated + report.requested, "available": available}))
    if report.free is not None and report.free >= report.requested:
        causes.append(Cause("free_now", {"free": report.free}))
    return tuple(causes)


def read(text: object) -> Reading:
    """Parse and diagnose; never raises on any input."""
    try:
        report = parse(text)
    except (ValueError, OverflowError, KeyError):  # a figure we cannot turn into bytes
        report = None
    if report is None:
        mentions = isinstance(text, str) and bool(_MENTIONS_OOM.search(text[-MAX_CHARS:]))
        return Reading(None, (), mentions)
    return Reading(report, diagnose(report), True)
