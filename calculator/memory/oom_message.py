"""Read a PyTorch out-of-memory message: its figures, and the causes they prove.

Every wording PyTorch's caching allocator has written (c10/cuda/CUDACachingAllocator.cpp):
  1.0 to 1.3   "Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already
               allocated; 9.28 GiB free; 4.68 MiB cached)"
  1.4 to 2.0   the same parenthesis, "... 13.98 GiB reserved in total by PyTorch)"
  2.1 on       sentences: "Tried to allocate 1.96 GiB. GPU 0 has a total capacty of 79.15 GiB of
               which 1.20 GiB is free. Process 2441 has 77.94 GiB memory in use. Of the allocated
               memory 75.68 GiB is allocated by PyTorch, and 1.74 GiB is reserved by PyTorch but
               unallocated." One sentence per process NVML lists: "Including non-PyTorch memory,
               this process has X memory in use." for this one when NVML's pid is its own,
               "Process N has X memory in use." otherwise (inside a container's pid namespace this
               process is one of those). 2.1 wrote "capacty" and advised max_split_size_mb; 2.2 on
               write "capacity" and advise expandable_segments.
  capped       "... of which 244.64 GiB is free. 1.05 GiB allowed; Of the allocated memory ..."
               (torch.cuda.set_per_process_memory_fraction)
  any 2.x      "with X allocated in private pools (e.g., CUDA Graphs)," inside the last sentence
  MPS          "MPS backend out of memory (MPS allocated: 9.57 GiB, other allocations: 17.35 GiB, max
               allowed: 27.20 GiB). Tried to allocate 292.50 MiB on private pool." (older releases
               labelled the same binary sizes GB and MB: a 16 GB Mac's cap reads 18.13 in both)
  XPU          "XPU out of memory. ... GPU 0 has a total capacity of 15.11 GiB. Of the allocated
               memory ..." (no free figure)
Sizes are PyTorch's format_size: "N bytes", then KiB, MiB, GiB with two decimals. ROCm says
"HIP out of memory" with the CUDA sentences. The text is whatever a user pasted: it is read with
bounded patterns, never evaluated, and anything unexpected reads as "not recognised".

What the figures prove. When cudaMalloc fails, the allocator first returns every cached block it
can to the driver, then retries: what stays "reserved but unallocated" sits in segments that
also hold live tensors. So the request could have been served from free + reserved-but-
unallocated memory if it were in one piece: when that sum covers the request, the failure is
fragmentation; when it does not, the tensors and the request together exceed what this process
could have (`too_big`). The two causes are exact complements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re

from calculator.core.units import GIB
from calculator.core.limits import MAX_EVIDENCE_BYTES

# As much as the evidence reader takes: a message followed by a long traceback (or a log) is read
# whole. Every pattern below is bounded, so reading all of it stays linear.
MAX_CHARS = MAX_EVIDENCE_BYTES

_SIZE = r"(\d{1,7}(?:[.,]\d{1,4})?)\s{0,3}(bytes|byte|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|kB)"
_UNITS = {"bytes": 1, "byte": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
          "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}

_REQUEST = re.compile(r"Tried to allocate " + _SIZE)
_LEGACY = re.compile(
    r"\(\s{0,3}(GPU\s{0,3}\d{0,3})\s{0,3};\s{0,3}" + _SIZE + r" total capacity;\s{0,3}" + _SIZE
    + r" already allocated;(?:\s{0,3}" + _SIZE + r" free;)?\s{0,3}" + _SIZE
    + r" (reserved in total by PyTorch|cached)")
_TOTAL = re.compile(r"(GPU\s{0,3}\d{0,3}) has a total capac\w{0,4} of " + _SIZE + r"(?: of which " + _SIZE
                    + r" is free)?")
_PROCESS = re.compile(r"Process (\d{1,10}) has " + _SIZE + r" memory in use")
_THIS_PROCESS = re.compile(r"Including non-PyTorch memory, this process has " + _SIZE + r" memory in use")
_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
_PRIVATE = re.compile(r"with " + _SIZE + r" allocated in private pools")
_UNALLOCATED = re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated")
_ALLOWED = re.compile(r"is free\.\s{0,3}" + _SIZE + r" allowed;")  # set_per_process_memory_fraction's cap
_MPS = re.compile(r"MPS backend out of memory \(MPS allocated: " + _SIZE + r", other allocations: " + _SIZE
                  + r", max allowed: " + _SIZE + r"\)\.\s{0,3}Tried to allocate " + _SIZE)
_MENTIONS_OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY", re.IGNORECASE)

# The wordings above, oldest first: what `OomReport.wording` says.
WORDINGS = ("cached", "reserved", "processes", "this_process", "no_free", "mps")
# What the wording says of the PyTorch that wrote it.
GENERATIONS = ("1.0-1.3", "1.4-2.0", "2.1", "2.2+", "mps")


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
    wording: str = "this_process"  # one of WORDINGS
    allowed: int | None = None  # the cap torch.cuda.set_per_process_memory_fraction set, when the message says
    generation: str = "2.2+"  # the PyTorch the wording comes from: one of GENERATIONS

    @property
    def reserved_unallocated(self) -> int:
        return max(self.reserved - self.allocated, 0)

    @property
    def reclaimable(self) -> int | None:
        """Free plus reserved-but-unallocated: all the memory the request could have used had
        it been in one piece."""
        return None if self.free is None else self.free + self.reserved_unallocated

    @property
    def outside_pytorch(self) -> int | None:
        """GPU memory neither free nor held by this PyTorch (total − free − allocated −
        reserved-but-unallocated): CUDA contexts, other libraries, other processes."""
        if self.free is None:
            return None
        return max(self.total - self.free - self.reserved, 0)

    @property
    def own_process(self) -> int | None:
        """What this process uses in all: its own sentence when NVML saw its pid; otherwise the
        listed process whose use best covers what PyTorch reserved (the smallest that does)."""
        if self.process_in_use is not None:
            return self.process_in_use
        if not self.processes:
            return None
        sizes = [size for _, size in self.processes]
        return min([s for s in sizes if s >= self.reserved] or [max(sizes)])

    @property
    def other_processes(self) -> int | None:
        """Memory the other listed processes hold (None: the message lists none)."""
        if not self.processes:
            return None
        total = sum(size for _, size in self.processes)
        return total if self.process_in_use is not None else total - self.own_process

    @property
    def this_process_outside_pytorch(self) -> int | None:
        """This process's memory outside PyTorch's allocator (in use − allocated − reserved-but-
        unallocated): its CUDA context, kernels, other libraries."""
        own = self.own_process
        # NVML can misreport a process ("this process has 0 bytes memory in use"): no reading then
        return None if own is None or own < self.reserved else own - self.reserved


@dataclass(frozen=True)
class Cause:
    """One cause the figures prove. `code` is the public id (the CLI's `causes`); `variant`
    picks the advice for the PyTorch that wrote the message (the UI key is `key`)."""

    code: str
    params: dict[str, int] = field(default_factory=dict)  # sizes in bytes
    variant: str = ""

    @property
    def key(self) -> str:
        return f"{self.code}_{self.variant}" if self.variant else self.code


@dataclass(frozen=True)
class Reading:
    report: OomReport | None
    causes: tuple[Cause, ...]
    mentions_oom: bool  # an out-of-memory message without figures we can read

    @property
    def cause_ids(self) -> tuple[str, ...]:
        return tuple(cause.code for cause in self.causes)


def parse(text: object) -> OomReport | None:
    """The figures of the last out-of-memory message in `text`, or None."""
    if not isinstance(text, str):
        return None
    text = " ".join(text[-MAX_CHARS:].split())  # wrapped lines and indentation do not matter
    mps = list(_MPS.finditer(text))
    if mps:
        return _mps(mps[-1].groups())
    requests = list(_REQUEST.finditer(text))
    if not requests:
        return None
    request = requests[-1]
    rest = text[request.end(): request.end() + 2_000]
    requested = _bytes(*request.groups())
    legacy = _LEGACY.search(rest)
    if legacy:
        g = legacy.groups()
        free = _bytes(g[5], g[6]) if g[5] is not None else None
        return OomReport("legacy", _device(g[0]), requested, _bytes(g[1], g[2]), free, _bytes(g[3], g[4]),
                         _bytes(g[7], g[8]), wording="cached" if g[9] == "cached" else "reserved",
                         generation="1.0-1.3" if g[9] == "cached" else "1.4-2.0")
    return _sentences(requested, rest)


def _binary(number: str, unit: str) -> int:
    """An MPS size: its "GB" and "MB" were binary units printed with decimal names."""
    return _bytes(number, {"GB": "GiB", "MB": "MiB", "KB": "KiB", "kB": "KiB"}.get(unit, unit))


def _mps(g: tuple[str, ...]) -> OomReport:
    """Apple's MPS allocator: the cap (recommended working set × PYTORCH_MPS_HIGH_WATERMARK_RATIO),
    PyTorch's tensors and what else the process holds on the GPU; no free figure."""
    allocated, other, allowed, requested = (_binary(g[i], g[i + 1]) for i in range(0, 8, 2))
    return OomReport("current", "MPS", requested, allowed, None, allocated, allocated,
                     process_in_use=allocated + other, allowed=allowed, wording="mps", generation="mps")


def _sentences(requested: int, rest: str) -> OomReport | None:
    total_match, allocated_match = _TOTAL.search(rest), _ALLOCATED.search(rest)
    unallocated_match = _UNALLOCATED.search(rest)
    if not (total_match and allocated_match and unallocated_match):
        return None
    allocated = _bytes(*allocated_match.groups())
    this, private, allowed = _THIS_PROCESS.search(rest), _PRIVATE.search(rest), _ALLOWED.search(rest)
    free = _bytes(*total_match.group(4, 5)) if total_match.group(4) else None
    processes = tuple((int(m.group(1)), _bytes(m.group(2), m.group(3))) for m in _PROCESS.finditer(rest))
    wording = "no_free" if free is None else "this_process" if this else "processes"
    return OomReport(
        "current", _device(total_match.group(1)), requested, _bytes(*total_match.group(2, 3)), free, allocated,
        allocated + _bytes(*unallocated_match.groups()), process_in_use=_bytes(*this.groups()) if this else None,
        processes=processes, private_pools=_bytes(*private.groups()) if private else 0, wording=wording,
        allowed=_bytes(*allowed.groups()) if allowed else None,
        generation="2.1" if "capacty" in rest or "try setting max_split_size_mb" in rest else "2.2+")


def printing_slack(size: int) -> int:
    """How far a size PyTorch printed (two decimals of its unit) may be from the true one."""
    unit = next((u for u in (2**30, 2**20, 2**10) if size > u), 1)
    return 0 if unit == 1 else unit // 200


def _device(text: str) -> str:
    return " ".join(text.split())


def diagnose(report: OomReport) -> tuple[Cause, ...]:
    """The causes the figures prove, most telling first. Each cause's params hold the figures
    its sentence compares, and the comparison holds on them (tests/test_oom_message.py checks it
    over generated messages). Thresholds say what matters, they are not tuned: memory that
    could have held the request, or a twentieth of the card."""
    causes = [_fit_cause(report)]
    notable = max(report.requested, report.total // 20)
    others = report.other_processes
    if others is not None and others >= notable:
        causes.append(Cause("other_process", {"others": others}))
    inside = report.this_process_outside_pytorch
    if inside is not None and inside >= max(notable, GIB):
        causes.append(Cause("outside_pytorch", {"outside": inside}, "here"))
    elif others is None and inside is None and (report.outside_pytorch or 0) >= max(notable, GIB):
        causes.append(Cause("outside_pytorch", {"outside": report.outside_pytorch}))
    if report.private_pools >= notable:
        causes.append(Cause("private_pools", {"pools": report.private_pools}))
    if report.requested * 4 >= report.total:
        causes.append(Cause("huge_request", {"requested": report.requested, "total": report.total}))
    if report.free is not None and report.free >= report.requested:
        causes.append(Cause("free_now", {"free": report.free, "requested": report.requested}))
    return tuple(causes)


def _fit_cause(report: OomReport) -> Cause:
    """Fragmentation or too big: which one the free and reserved-but-unallocated figures prove."""
    unallocated, requested, allocated = report.reserved_unallocated, report.requested, report.allocated
    needed = allocated + requested
    if report.wording == "mps":
        return _mps_cause(report)
    if report.allowed is not None and report.reserved + requested > report.allowed - printing_slack(report.allowed):
        # the allocator refuses what would take its reserve past the cap (as printed, to two decimals)
        params = {"needed": report.reserved + requested, "allowed": report.allowed, "reserved": report.reserved,
                  "requested": requested}
        return Cause("memory_fraction", params, "" if params["needed"] > report.allowed else "rounded")
    if report.free is None:  # XPU: only PyTorch's own figures and the card's total are known
        if unallocated >= requested:
            return Cause("fragmentation", {"unallocated": unallocated, "requested": requested}, "nofree")
        if needed > report.total:
            return Cause("too_big", {"needed": needed, "total": report.total, "allocated": allocated,
                                     "requested": requested}, "card")
        return Cause("unknown_free", {"needed": needed, "total": report.total})
    reclaimable = report.reclaimable
    if reclaimable >= requested:
        variant = "current" if report.style == "current" else "legacy"
        return Cause("fragmentation", {"unallocated": unallocated, "free": report.free, "reclaimable": reclaimable,
                                       "requested": requested}, variant)
    outside = report.outside_pytorch  # total − outside ≤ allocated + reclaimable < needed, in any message
    return Cause("too_big", {"needed": needed, "available": report.total - outside, "outside": outside,
                             "total": report.total, "allocated": allocated, "requested": requested})


def _mps_cause(report: OomReport) -> Cause:
    """MPS refuses what would take the process's GPU allocations past the cap."""
    needed = report.process_in_use + report.requested
    params = {"needed": needed, "allowed": report.allowed, "allocated": report.allocated,
              "other": report.process_in_use - report.allocated, "requested": report.requested}
    if needed > report.allowed:
        return Cause("memory_fraction", params, "mps")
    if needed > report.allowed - printing_slack(report.allowed):
        return Cause("memory_fraction", params, "mps_rounded")
    # under the cap: something outside the process held the memory (the message cannot say what)
    return Cause("unknown_free", {"needed": report.allocated + report.requested, "total": report.allowed})


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


def figures_json(report: OomReport) -> dict:
    """The figures in bytes, with the derived ones, under stable keys (the CLI's JSON)."""
    return {"style": report.style, "wording": report.wording, "generation": report.generation, "device": report.device,
            "requested_bytes": report.requested, "total_bytes": report.total, "free_bytes": report.free,
            "allocated_bytes": report.allocated, "reserved_bytes": report.reserved,
            "reserved_unallocated_bytes": report.reserved_unallocated, "reclaimable_bytes": report.reclaimable,
            "outside_pytorch_bytes": report.outside_pytorch, "process_in_use_bytes": report.own_process,
            "this_process_outside_pytorch_bytes": report.this_process_outside_pytorch,
            "other_processes_bytes": report.other_processes, "private_pools_bytes": report.private_pools,
            "allowed_bytes": report.allowed,
            "processes": [{"pid": pid, "bytes": size} for pid, size in report.processes]}
