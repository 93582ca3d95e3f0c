"""Counting a Hub checkpoint from its safetensors headers: no weights, no config, no code.

A safetensors file starts with a JSON header that lists every tensor's name, dtype, shape
and byte range. huggingface_hub reads only those first bytes (HTTP Range requests), so the
parameters of a 400B checkpoint are counted from a few megabytes, even when its config
needs code from the repository or its weights are already quantized.

What the headers give is what is *stored*: packed formats (GPTQ and AWQ keep eight 4-bit
weights in one int32) count stored elements, not weights. Bytes are exact either way.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
import json
import os
import re

from .errors import CalculatorError
from .hub import TIMEOUT_SECONDS, check_hub_id
from .summary import ModelSummary, Unit

# A sharded checkpoint has one request per shard: the largest open models have a few
# hundred. An index naming more is refused before any of them is requested.
MAX_SHARDS = 1024
INDEX_FILE = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 * 2**20
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


def count_tensors(repo: str, tensors, files: int) -> HeaderCount:
    """Count (name, dtype, shape, (begin, end)) tensor entries. Bytes come from the byte
    ranges, so sub-byte dtypes (F4, packed int4) are exact too."""
    elements: dict[str, int] = defaultdict(int)
    sizes: dict[str, int] = defaultdict(int)
    units: dict[str, int] = {}
    count = 0
    for name, dtype, shape, offsets in tensors:
        numel = 1
        for dim in shape:
            numel *= int(dim)
        begin, end = offsets
        elements[dtype] += numel
        sizes[dtype] += int(end) - int(begin)
        unit = unit_of(name)
        units[unit] = units.get(unit, 0) + numel
        count += 1
    dtypes = tuple(sorted((DtypeCount(d, elements[d], sizes[d]) for d in elements), key=lambda d: -d.bytes))
    return HeaderCount(repo=repo, files=files, tensors=count, dtypes=dtypes,
                       units=tuple(Unit(name, n) for name, n in units.items()))


def read_headers(repo_id: str, timeout: float = TIMEOUT_SECONDS) -> HeaderCount:
    """Count a Hub repository's safetensors weights from their headers (huggingface_hub's
    get_safetensors_metadata: Range requests, no weights downloaded, no code run)."""
    repo_id = check_hub_id(repo_id)
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hub_errors

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=os.environ.get("HF_TOKEN") or None)
    try:
        _check_shard_count(api, repo_id, timeout)
        metadata = api.get_safetensors_metadata(repo_id, timeout=timeout)
    except CalculatorError:
        raise
    except hub_errors.GatedRepoError:
        raise CalculatorError("hub_gated", repo=repo_id) from None
    except (hub_errors.RepositoryNotFoundError, hub_errors.RevisionNotFoundError):
        raise CalculatorError("hub_not_found", repo=repo_id) from None
    except hub_errors.NotASafetensorsRepoError:
        raise CalculatorError("no_safetensors", repo=repo_id) from None
    except hub_errors.SafetensorsParsingError:
        raise CalculatorError("safetensors_unreadable", repo=repo_id) from None
    except Exception as exc:  # offline, DNS, timeouts, server errors
        raise CalculatorError("hub_unreachable", repo=repo_id, detail=type(exc).__name__) from None
    tensors = [
        (name, info.dtype, info.shape, info.data_offsets)
        for file_metadata in metadata.files_metadata.values()
        for name, info in file_metadata.tensors.items()
    ]
    return count_tensors(repo_id, tensors, len(metadata.files_metadata))


def _check_shard_count(api, repo_id: str, timeout: float) -> None:
    """Refuse an index that names more shards than any real checkpoint, before the client
    sends one request per shard. One HEAD request first, without the retries of a download,
    so an unreachable Hub is reported at once; the client then reads the index from the
    local cache."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub import errors as hub_errors

    try:
        get_hf_file_metadata(hf_hub_url(repo_id, INDEX_FILE, endpoint=api.endpoint), token=api.token,
                             timeout=timeout)
    except hub_errors.EntryNotFoundError:
        return  # a single model.safetensors, or no safetensors at all: the client tells
    path = api.hf_hub_download(repo_id, INDEX_FILE, etag_timeout=timeout)
    with open(path, "rb") as handle:
        raw = handle.read(MAX_INDEX_BYTES + 1)
    try:
        index = json.loads(raw) if len(raw) <= MAX_INDEX_BYTES else None
        files = set(index["weight_map"].values())
    except (ValueError, TypeError, KeyError, AttributeError):
        raise CalculatorError("safetensors_unreadable", repo=repo_id) from None
    if len(files) > MAX_SHARDS:
        raise CalculatorError("safetensors_too_many_files", repo=repo_id, files=len(files), limit=MAX_SHARDS)
