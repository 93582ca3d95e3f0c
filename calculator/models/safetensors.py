"""Counting a Hub checkpoint from its safetensors headers: no weights, no config, no code.

A safetensors file starts with a JSON header that lists every tensor's name, dtype, shape
and byte range. huggingface_hub reads only those first bytes (HTTP Range requests), so the
parameters of a 400B checkpoint are counted from a few megabytes, even when its config
needs code from the repository or its weights are already quantized.

What the headers give is what is *stored*: packed formats (GPTQ and AWQ keep eight 4-bit
weights in one int32) count stored elements, not weights. Bytes are exact either way.

The headers come from whoever runs the repository, so everything about them is bounded before
it is fetched: the shards an index names, the tensors it lists, the bytes of each header (read
from its 8-byte length before the rest is asked for) and of all of them together, the layers
found in the names. Every tensor is checked as it is counted: a known dtype's byte range must
hold exactly its shape, dimensions and offsets are whole numbers that are not negative, and no
tensor or checkpoint is absurdly large. Counts are integers throughout.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
import json
import os
import re
import threading

from calculator.core.errors import CalculatorError, Grouped
from calculator.models.hub import Deadline, HubFile, check_hub_id, read_file
from calculator.models.summary import ModelSummary, Unit

# A sharded checkpoint has one request per shard: the largest open models have a few
# hundred. An index naming more is refused before any of them is requested.
MAX_SHARDS = 1024
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_INDEX_BYTES = 32 * 2**20  # DeepSeek-V3's index (92,000 tensors) is about 9 MB
# What the headers may hold, in all. DeepSeek-V3 lists about 92,000 tensors in 163 shards and
# Kimi K2 about 140,000; a shard's header is a few hundred kilobytes.
MAX_TENSORS = 250_000
MAX_HEADER_BYTES = 16 * 2**20  # one file's header (the Hub's own reader stops at 25 MB)
FORMAT_MAX_HEADER_BYTES = 100_000_000  # the safetensors format's own limit: beyond, not a header
MAX_TOTAL_HEADER_BYTES = 64 * 2**20  # all of them together
MAX_UNITS = 20_000  # layers found in the names: a real checkpoint has hundreds
MAX_TENSOR_ELEMENTS = 2**48  # one tensor: far above any real one (a 405B model's largest has 2^30)
MAX_ELEMENTS = 10**14  # the whole checkpoint: 100 trillion
MAX_OFFSET = 2**50  # a byte range inside a file of at most a pebibyte
FIRST_READ_BYTES = 100_000  # as huggingface_hub reads: most headers fit in it
READERS = 8  # shards read at once
# Bits per element of the dtypes safetensors names: a byte range must hold exactly the shape.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16,
    "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64, "F4": 4, "F6_E2M3": 6,
    "F6_E3M2": 6, "C64": 64,
}
_DTYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,15}$")
# Integer storage in a checkpoint of a floating-point model means packed or quantized weights.
INTEGER_DTYPES = frozenset({"I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "I4", "U4"})
_INDEX = re.compile(r"^\d+$")


@dataclass(frozen=True)
class DtypeCount:
    """Tensors stored in one dtype (named as safetensors names it: BF16, F32, I32...)."""

    dtype: str
    elements: int
    bytes: int


@dataclass(frozen=True)
class HeaderCount:
    """A checkpoint as its safetensors headers describe it."""

    repo: str
    files: int
    tensors: int
    dtypes: tuple[DtypeCount, ...]  # largest first
    units: tuple[Unit, ...]  # layers, from the tensor names, in checkpoint order

    @property
    def elements(self) -> int:
        return sum(d.elements for d in self.dtypes)

    @property
    def stored_bytes(self) -> int:
        return sum(d.bytes for d in self.dtypes)

    @property
    def packed(self) -> bool:
        """True when some tensors are stored as integers: quantized or packed weights, whose
        element count is not a weight count."""
        return any(d.dtype in INTEGER_DTYPES for d in self.dtypes)

    def largest_unit(self) -> Unit | None:
        return max(self.units, key=lambda u: u.parameters, default=None)

    def summary(self, architecture: str = "", model_type: str = "") -> ModelSummary:
        """The stored tensors as a ModelSummary, so the per-precision table of an ordinary
        count applies: every stored element is a parameter (persistent buffers included)."""
        return ModelSummary(
            architecture=architecture, model_type=model_type, model_class="auto",
            parameters=self.elements, trainable_parameters=self.elements, active_parameters=None,
            fixed_buffer_bytes=0, scaled_buffer_elements=0, units=self.units,
        )

    def to_json(self) -> dict:
        largest = self.largest_unit()
        return {
            "model": self.repo, "source": "safetensors", "files": self.files, "tensors": self.tensors,
            "parameters": self.elements, "stored_bytes": self.stored_bytes, "packed": self.packed,
            "dtypes": [{"dtype": d.dtype, "parameters": d.elements, "bytes": d.bytes} for d in self.dtypes],
            "largest_layer": largest.name if largest else "",
            "largest_layer_parameters": largest.parameters if largest else 0,
        }


def unit_of(tensor_name: str) -> str:
    """The layer a tensor belongs to, from its name alone: up to the first numeric part
    (model.layers.12.mlp.up_proj.weight -> model.layers.12), else its module
    (model.embed_tokens.weight -> model.embed_tokens). This is accelerate's unit for the
    usual checkpoints, whose repeated blocks are the modules it never splits."""
    parts = tensor_name.split(".")
    for i, part in enumerate(parts[:-1]):
        if _INDEX.match(part):
            return ".".join(parts[: i + 1])
    return ".".join(parts[:-1]) or tensor_name


class _Tally:
    """Tensors counted as they come, checked one by one, within the bounds above."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.elements: dict[str, int] = defaultdict(int)
        self.sizes: dict[str, int] = defaultdict(int)
        self.units: dict[str, int] = {}
        self.tensors = 0
        self.total = 0

    def add(self, name, dtype, shape, offsets) -> None:
        if not isinstance(name, str) or not isinstance(dtype, str) or not _DTYPE.match(dtype):
            raise CalculatorError("safetensors_bad_tensor", repo=self.repo, name=_shown(name))
        numel = _elements(shape)
        begin, end = _offsets(offsets)
        if numel is None or begin is None or numel > MAX_TENSOR_ELEMENTS:
            raise CalculatorError("safetensors_bad_tensor", repo=self.repo, name=_shown(name))
        bits = DTYPE_BITS.get(dtype)
        if bits is not None and end - begin != (numel * bits + 7) // 8:
            raise CalculatorError("safetensors_bad_tensor", repo=self.repo, name=_shown(name))
        self.tensors += 1
        self.total += numel
        if self.tensors > MAX_TENSORS:
            raise CalculatorError("safetensors_too_many_tensors", repo=self.repo, tensors=f"> {MAX_TENSORS}",
                                  limit=MAX_TENSORS)
        if self.total > MAX_ELEMENTS:
            raise CalculatorError("safetensors_bad_tensor", repo=self.repo, name=_shown(name))
        self.elements[dtype] += numel
        self.sizes[dtype] += end - begin
        unit = unit_of(name)
        if unit not in self.units and len(self.units) >= MAX_UNITS:
            raise CalculatorError("safetensors_too_many_layers", repo=self.repo, limit=MAX_UNITS)
        self.units[unit] = self.units.get(unit, 0) + numel

    def result(self, files: int) -> HeaderCount:
        dtypes = tuple(sorted((DtypeCount(d, self.elements[d], self.sizes[d]) for d in self.elements),
                              key=lambda d: -d.bytes))
        return HeaderCount(repo=self.repo, files=files, tensors=self.tensors, dtypes=dtypes,
                           units=tuple(Unit(name, n) for name, n in self.units.items()))


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _elements(shape) -> int | None:
    """The element count of a shape of whole, non-negative dimensions; None for anything else."""
    if not isinstance(shape, list | tuple) or len(shape) > 16:
        return None
    numel = 1
    for dim in shape:
        if not _whole(dim) or not 0 <= dim <= MAX_TENSOR_ELEMENTS:
            return None
        numel *= dim
        if numel > MAX_TENSOR_ELEMENTS:
            return numel
    return numel


def _offsets(offsets) -> tuple[int | None, int | None]:
    if not isinstance(offsets, list | tuple) or len(offsets) != 2:
        return None, None
    begin, end = offsets
    if not (_whole(begin) and _whole(end) and 0 <= begin <= end <= MAX_OFFSET):
        return None, None
    return begin, end


def _shown(name) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in str(name))
    return text if len(text) <= 60 else text[:57] + "..."


def count_tensors(repo: str, tensors, files: int) -> HeaderCount:
    """Count (name, dtype, shape, (begin, end)) tensor entries, each checked. Bytes come from
    the byte ranges, so sub-byte dtypes (F4, packed int4) are exact too."""
    tally = _Tally(repo)
    for name, dtype, shape, offsets in tensors:
        tally.add(name, dtype, shape, offsets)
    return tally.result(files)


def read_headers(repo_id: str, deadline: Deadline | None = None) -> HeaderCount:
    """Count a Hub repository's safetensors weights from their headers. The index and the
    headers are read and parsed in a build worker (calculator/models/builder.py), within its memory
    and time limits and the Hub's deadline: whatever the repository holds, the process that
    asks only ever holds the count."""
    from calculator.models import builder
    from calculator.core.reasons import reason
    from calculator.models.hub import endpoint, offline

    repo_id = check_hub_id(repo_id)
    if offline():  # said at once, without starting a worker (importing torch takes seconds)
        raise CalculatorError("hub_unreachable", repo=repo_id, detail=reason("offline_mode"))
    deadline = deadline or Deadline()
    return builder.build({"op": "read_headers", "repo": repo_id, "endpoint": endpoint(),
                          "token": os.environ.get("HF_TOKEN") or None, "until": deadline.end})


def read_headers_here(repo_id: str, endpoint: str = "", token: str | None = None,
                      deadline: Deadline | None = None) -> HeaderCount:
    """read_headers in this process (the build worker calls it): Range requests through
    huggingface_hub's HTTP client, every amount bounded before or while it is fetched, no
    weights downloaded, no code run."""
    repo_id = check_hub_id(repo_id)
    deadline = deadline or Deadline()
    where = HubFile(repo_id, INDEX_FILE, MAX_INDEX_BYTES, missing="hub_no_index", endpoint=endpoint, token=token,
                    too_large=("safetensors_index_too_large", {"repo": repo_id}))
    files = _shard_files(where, deadline)
    headers = _read_all(where, files, deadline)
    tally = _Tally(repo_id)
    for raw in headers:  # in file order, one at a time: one parsed header in memory at once
        header = parse_bounded(raw, repo_id, max_containers=3 * MAX_TENSORS + 8, max_commas=len(raw) // 8 + 64)
        if not isinstance(header, dict):
            raise CalculatorError("safetensors_unreadable", repo=repo_id)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if not isinstance(info, dict):
                raise CalculatorError("safetensors_bad_tensor", repo=repo_id, name=_shown(name))
            tally.add(name, info.get("dtype"), info.get("shape"), info.get("data_offsets"))
        del header
    return tally.result(len(files))


def parse_bounded(raw: bytes, repo: str, max_containers: int, max_commas: int):
    """JSON whose parsed size is bounded before it is parsed: the objects and lists it opens
    and the commas that separate its values are counted first (a parsed value costs up to a
    hundred times the bytes that write it: `[{},{},...]` or `[0,0,...]`). A real index has a
    handful of objects and one comma per tensor; a real header one object and a few commas per
    tensor, each written in dozens of bytes."""
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > max_containers or raw.count(b",") > max_commas:
        raise CalculatorError("safetensors_unreadable", repo=repo)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise CalculatorError("safetensors_unreadable", repo=repo) from None


def _shard_files(where: HubFile, deadline: Deadline) -> list[str]:
    """The safetensors files to read: the shards the index names (refused past MAX_SHARDS
    files or MAX_TENSORS tensors, before any of them is requested), or the single file."""
    repo_id = where.repo
    try:
        raw = read_file(where, deadline)
    except CalculatorError as error:
        if error.code == "hub_no_index":
            return [SINGLE_FILE]  # or no safetensors at all: reading it tells
        raise
    index = parse_bounded(raw, repo_id, max_containers=64, max_commas=MAX_TENSORS + 1024)
    del raw
    try:
        weight_map = index["weight_map"]
        names = set(weight_map.values())
        tensors = len(weight_map)
    except (TypeError, KeyError, AttributeError):
        raise CalculatorError("safetensors_unreadable", repo=repo_id) from None
    if len(names) > MAX_SHARDS:
        raise CalculatorError("safetensors_too_many_files", repo=repo_id, files=Grouped(len(names)),
                              limit=Grouped(MAX_SHARDS))
    if tensors > MAX_TENSORS:
        raise CalculatorError("safetensors_too_many_tensors", repo=repo_id, tensors=Grouped(tensors),
                              limit=Grouped(MAX_TENSORS))
    if not all(isinstance(n, str) and n.endswith(".safetensors") and ".." not in n and not n.startswith("/")
               and len(n) <= 200 for n in names):
        raise CalculatorError("safetensors_unreadable", repo=repo_id)
    return sorted(names)


class _HeaderBudget:
    """Header bytes fetched so far, across the shards read at once."""

    def __init__(self, repo: str) -> None:
        self.repo, self.used, self._lock = repo, 0, threading.Lock()

    def take(self, size: int) -> None:
        if size > MAX_HEADER_BYTES:
            raise CalculatorError("safetensors_headers_too_large", repo=self.repo, size_mib=_mib(size),
                                  limit_mib=_mib(MAX_HEADER_BYTES))
        with self._lock:
            self.used += size
            used = self.used
        if used > MAX_TOTAL_HEADER_BYTES:
            raise CalculatorError("safetensors_headers_too_large", repo=self.repo, size_mib=f"> {_mib(used)}",
                                  limit_mib=_mib(MAX_TOTAL_HEADER_BYTES))


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f}"


def _read_all(where: HubFile, files: list[str], deadline: Deadline) -> list[bytes]:
    """Every file's header bytes, in file order (READERS files at a time)."""
    budget = _HeaderBudget(where.repo)
    if len(files) == 1:
        return [_read_header(where, files[0], deadline, budget, single=True)]
    with ThreadPoolExecutor(max_workers=min(READERS, len(files))) as pool:
        return list(pool.map(lambda name: _read_header(where, name, deadline, budget), files))


def _read_header(where: HubFile, filename: str, deadline: Deadline, budget: _HeaderBudget,
                 single: bool = False) -> bytes:
    """One file's JSON header: its first bytes (the 8-byte length and, usually, the whole
    header), then the rest of the header if it is longer, once the budget allows it."""
    from dataclasses import replace

    repo_id = where.repo
    shard = replace(where, filename=filename, cap=FIRST_READ_BYTES,
                    missing="no_safetensors" if single else "safetensors_unreadable",
                    too_large=("safetensors_unreadable", {}))
    first = read_file(shard, deadline, 0, FIRST_READ_BYTES - 1)
    if len(first) < 8:
        raise CalculatorError("safetensors_unreadable", repo=repo_id)
    size = int.from_bytes(first[:8], "little")
    if not 2 <= size <= FORMAT_MAX_HEADER_BYTES:  # not a safetensors file
        raise CalculatorError("safetensors_unreadable", repo=repo_id)
    budget.take(size)
    if size <= len(first) - 8:
        return first[8:8 + size]
    rest = read_file(replace(shard, cap=size + 8 - len(first)), deadline, len(first), size + 7)
    header = first[8:] + rest
    if len(header) != size:
        raise CalculatorError("safetensors_unreadable", repo=repo_id)
    return header
