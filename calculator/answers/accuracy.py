"""How close the calculator comes to real memory: targets, predictions, result files.

bench/accuracy.py builds real models with random weights, runs them on the CPU or on a CUDA
GPU, and writes one JSON file per run into bench/results/. This module holds what the
harness and its readers share: the targets per kind of estimate, the calculator's
prediction for a measured setting (the same functions the guide and the CLI call), and the
reading of result files for the estimator chapter and `python -m calculator accuracy`.

A result file: {"schema": 1, "grid": "full" | "quick", "started": ISO time, "complete": bool,
"device": {"type": "cpu" | "cuda", "name": ..., "measure": ..., "cuda_context_bytes": ...},
"versions": {...}, "models": {name: {"catalog": key, "overrides": {...}, "config": {...},
"parameters": n}}, "rows": [{"kind", "model", "settings", "split", "measured_bytes",
"predicted_bytes", "error", "within_target", "detail"}], "skipped": [...]}. Errors are
predicted / measured - 1: positive when the calculator says more than was measured.

Nothing here imports torch, except through counting a config that is not in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
import json
import math
from pathlib import Path
import statistics

from calculator.memory.estimate import rows_for
from calculator.models.seam import Model, catalog_model, resolve_config

KINDS = ("load", "inference", "training")
# Load: the weights and buffers, exact by construction: what is left is the allocator's
# rounding. Inference and training peaks: LLMem reports 1.6% on one GPU for fine-tuning.
TARGETS = {"load": 0.005, "inference": 0.05, "training": 0.05}
SPLITS = ("development", "check")  # check: never looked at to change the calculator
DEVICE_TYPES = ("cpu", "cuda")
SCHEMA = 1


def relative_error(predicted: int, measured: int) -> float:
    return predicted / measured - 1 if measured else math.inf


def within_target(kind: str, error: float) -> bool:
    return abs(error) <= TARGETS[kind]


# -- predictions --------------------------------------------------------------------------

def resolve_source(name: str, source: dict) -> Model:
    """The counted model of a result file's model entry: the stored catalog count when it is
    a catalog model as it is (what a reader of the guide gets), else its config counted."""
    if source.get("catalog") and not source.get("overrides"):
        return catalog_model(source["catalog"])
    return resolve_config(source["config"], name)


def predict(kind: str, model: Model, config: dict, settings: dict) -> tuple[int, dict]:
    """(predicted bytes, what they are made of) for one measured setting.
    load: {"dtype"}; inference: {"dtype", "attention", "mode", "batch", "context"};
    training: the fields of calculator.training.TrainingSetup."""
    if kind == "load":
        return rows_for(model.summary, (settings["dtype"],))[0].total_bytes, {}
    if kind == "inference":
        from calculator.memory.inference import inference_memory

        memory = inference_memory(model.summary, model.spec, settings["batch"], settings["context"],
                                  dtype=settings["dtype"], attention=settings["attention"], mode=settings["mode"])
        return memory.total_bytes, {"weights_bytes": memory.weights_bytes, "kv_cache_bytes": memory.kv_cache_bytes,
                                    "activation_peak_bytes": memory.activation_peak_bytes,
                                    "peak_moment": memory.peak_moment}
    if kind == "training":
        from calculator.models.families import traits_from_config
        from calculator.training import TrainingSetup, training_memory

        memory = training_memory(model.summary, model.spec, TrainingSetup(**settings),
                                 traits=traits_from_config(config, model.summary.model_type))
        return memory.total_bytes, {"peak_moment": memory.peak_moment, "at_peak": memory.at_peak}
    raise ValueError(kind)


# -- result files -------------------------------------------------------------------------

@dataclass(frozen=True)
class ResultRow:
    kind: str
    model: str
    settings: dict
    split: str
    measured_bytes: int
    predicted_bytes: int
    error: float
    within_target: bool
    detail: dict

    @classmethod
    def from_dict(cls, data: dict) -> ResultRow:
        row = cls(kind=str(data["kind"]), model=str(data["model"]), settings=dict(data["settings"]),
                  split=str(data["split"]), measured_bytes=int(data["measured_bytes"]),
                  predicted_bytes=int(data["predicted_bytes"]), error=float(data["error"]),
                  within_target=bool(data["within_target"]), detail=dict(data.get("detail", {})))
        if row.kind not in KINDS or row.split not in SPLITS or row.measured_bytes <= 0:
            raise ValueError("not a result row")
        return row


@dataclass(frozen=True)
class ResultRun:
    path: Path
    grid: str
    started: str
    complete: bool
    seconds: float
    device: dict
    versions: dict
    models: dict
    rows: tuple[ResultRow, ...]
    skipped: tuple[str, ...]

    @property
    def device_type(self) -> str:
        return self.device["type"]

    def parameters(self, model: str) -> int | None:
        return self.models.get(model, {}).get("parameters")


# A run of the full grid writes a few hundred kilobytes; a result file larger than this is not one.
MAX_RESULT_BYTES = 16 * 2**20


def read_run(path: Path) -> ResultRun | None:
    """A result file, or None if it is not one this version reads (never an exception: the
    page shows the files it can read)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size > MAX_RESULT_BYTES:
        return None
    return _read_run(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_run(path: Path, modified: int, size: int) -> ResultRun | None:
    """Cached by path, modification time and size: a rewritten file is read again."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA or data["device"]["type"] not in DEVICE_TYPES:
            return None
        return ResultRun(path=path, grid=str(data["grid"]), started=str(data["started"]),
                         complete=bool(data["complete"]), seconds=float(data.get("seconds", 0)),
                         device=dict(data["device"]),
                         versions={str(k): str(v) for k, v in data["versions"].items()},
                         models=dict(data["models"]), rows=tuple(ResultRow.from_dict(r) for r in data["rows"]),
                         skipped=tuple(str(s) for s in data.get("skipped", ())))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None  # RecursionError: JSON nested deeper than Python parses


def latest_runs(directory: Path, grid: str = "full") -> list[ResultRun]:
    """The most recent run of that grid per device type (the CPU first), that has rows, among
    the result files of `directory` (the guide and the CLI pass bench.RESULTS_DIR)."""
    directory = Path(directory)
    runs = [run for path in sorted(directory.glob("*.json")) if (run := read_run(path)) is not None]
    latest: dict[str, ResultRun] = {}
    for run in runs:
        if run.grid == grid and run.rows and (run.device_type not in latest
                                              or run.started > latest[run.device_type].started):
            latest[run.device_type] = run
    return [latest[d] for d in DEVICE_TYPES if d in latest]


@dataclass(frozen=True)
class KindSummary:
    kind: str
    target: float
    cases: int
    within: int
    median_abs_error: float
    largest_abs_error: float


def summarize(rows) -> list[KindSummary]:
    """Per kind, in KINDS order: how many rows, how many within the target, the median and
    largest absolute error."""
    out = []
    for kind in KINDS:
        errors = [abs(r.error) for r in rows if r.kind == kind]
        if errors:
            out.append(KindSummary(kind, TARGETS[kind], len(errors), sum(e <= TARGETS[kind] for e in errors),
                                   statistics.median(errors), max(errors)))
    return out
