"""Published measurements: the calculator against GPU memory figures other people measured.

Each row of bench/data/published.json is one figure from a public source (the transformers
documentation, optimum and optimum-benchmark reports, the LLM.int8 demo, transformers'
bitsandbytes tests): the model, the card, the setup, the figure in bytes and what it counts
(allocated, reserved, nvidia-smi, allocated plus the CUDA context, or a model's footprint).
The row's `calculator` field gives the engine's arguments for the same run; the benchmark
reads the engine's prediction the way the source measured it (budget.readings_of) and
compares. Targets: 5% for allocated, reserved and footprint figures, 10% for figures that
include the CUDA context (nvidia-smi, allocated + context). Rows whose setup or measure is
not known well enough are listed with the reason and not judged; judged rows outside their
target carry their cause (`known_miss`). Development rows set a constant of the calculator;
the others only check. Nothing here runs on a GPU. Run: python -m bench published
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
import json
from pathlib import Path
from types import SimpleNamespace

DATA = Path(__file__).resolve().parent / "data"
PUBLISHED = DATA / "published.json"
KINDS = ("load", "inference16", "bnb8", "bnb4", "training-full", "training-lora", "training-qlora")
KIND_NAMES = {"load": "load", "inference16": "16-bit inference", "bnb8": "bitsandbytes 8-bit inference",
              "bnb4": "bitsandbytes 4-bit inference", "training-full": "full fine-tuning",
              "training-lora": "LoRA", "training-qlora": "QLoRA"}


@dataclass(frozen=True)
class Comparison:
    id: str
    kind: str
    model: str
    measures: str
    measured: float  # bytes, or a ratio for "footprint ratio"
    predicted: float | None
    target: float
    status: str  # judged, not judged
    split: str
    known_miss: str | None
    reason: str | None
    source_url: str

    @property
    def judged(self) -> bool:
        return self.status == "judged"

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured - 1

    @property
    def within_target(self) -> bool:
        return self.error is not None and abs(self.error) <= self.target


@lru_cache(maxsize=1)
def data() -> dict:
    return json.loads(PUBLISHED.read_text(encoding="utf-8"))


def rows() -> tuple[dict, ...]:
    return tuple(data()["rows"])


@lru_cache(maxsize=16)
def model_of(name: str):
    """catalog:<key>[:base], or configs/<file>.json[:<class>] (a saved config, counted on the
    meta device as the run's class: the architectures entry is replaced by it)."""
    from calculator.models.seam import catalog_model, resolve_config

    if name.startswith("catalog:"):
        key, _, model_class = name.removeprefix("catalog:").partition(":")
        return catalog_model(key, model_class or "auto")
    path, _, architecture = name.partition(":")
    config = json.loads((DATA / path).read_text(encoding="utf-8"))
    config.pop("_note", None)
    if architecture:
        config["architectures"] = [architecture]
    return resolve_config(config, Path(path).stem)


def _weights(model, dtype: str) -> int:
    from calculator.memory.inference import weights_of

    return weights_of(model.summary, model.spec, dtype)[0]


def predict(row: dict) -> float | None:
    """The engine's figure for what the row measured (bytes, or a ratio)."""
    from calculator.core.budget import readings_of
    from calculator.core.cuda_context import context_for

    calc = row["calculator"]
    if calc is None:
        return None
    model = model_of(calc["model"])
    context = row["context_bytes"] or context_for(None).bytes
    if calc["run"] == "ratio":
        return _weights(model, calc["reference"]) / _weights(model, calc["dtype"])
    if calc["run"] == "load":
        weights = _weights(model, calc["dtype"])
        memory = SimpleNamespace(total_bytes=weights, steady_bytes=weights, rounding_bytes=0)
    elif calc["run"] == "inference":
        from calculator.memory.inference import inference_memory

        memory = inference_memory(model.summary, model.spec, calc["batch"], dtype=calc["dtype"],
                                  attention=calc["attention"], mode=calc["mode"], prompt=calc["prompt"],
                                  new_tokens=calc["new_tokens"], cache=calc["cache"],
                                  bnb_compute_dtype=calc["bnb_compute_dtype"])
    else:
        from calculator.training import Layout, TrainingSetup, training_memory

        memory = training_memory(model.summary, model.spec, TrainingSetup(**calc["setup"]), Layout(), model.traits)
    readings = readings_of(memory, context=context)
    return {"allocated": readings.allocated_bytes, "footprint": readings.allocated_bytes,
            "reserved": readings.reserved_bytes, "nvidia-smi": readings.nvidia_smi_bytes,
            "allocated+context": readings.allocated_bytes + context}.get(row["measures"], readings.allocated_bytes)


def compare(row: dict) -> Comparison:
    measured = row["figure"]["value"] if row["measures"] == "footprint ratio" else row["figure"]["bytes"]
    target = data()["targets"].get(row["measures"], 0.0)
    return Comparison(row["id"], row["kind"], row["model"], row["measures"], measured, predict(row), target,
                      row["status"], row["split"], row["known_miss"], row["reason"], row["source_url"])


def comparisons() -> list[Comparison]:
    return [compare(row) for row in rows()]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2%}"


def _figure(value: float | None, measures: str) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if measures == "footprint ratio" else f"{value / 1e9:,.3f} GB"


def summary(results: list[Comparison]) -> str:
    """Per kind: judged rows, within target, median and largest error (absolute)."""
    lines = ["| kind | judged rows | within target | median error | largest error |", "|---|---|---|---|---|"]
    every = []
    for kind in KINDS:
        errors = sorted(abs(c.error) for c in results if c.judged and c.kind == kind)
        inside = sum(c.within_target for c in results if c.judged and c.kind == kind)
        every += errors
        if not errors:
            lines.append(f"| {KIND_NAMES[kind]} | 0 | - | - | - |")
            continue
        lines.append(f"| {KIND_NAMES[kind]} | {len(errors)} | {inside} | {_median(errors):.2%} | {errors[-1]:.2%} |")
    inside = sum(c.within_target for c in results if c.judged)
    every.sort()
    lines.append(f"| all | {len(every)} | {inside} | {_median(every):.2%} | {every[-1]:.2%} |")
    return "\n".join(lines)


def _median(values: list[float]) -> float:
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def table(results: list[Comparison]) -> str:
    lines = ["| row | kind | measures | published | predicted | error | target | split |",
             "|---|---|---|---|---|---|---|---|"]
    for c in results:
        if not c.judged:
            continue
        mark = "" if c.within_target else " (miss)"
        lines.append(f"| [{c.id}]({c.source_url}) | {c.kind} | {c.measures} | {_figure(c.measured, c.measures)} | "
                     f"{_figure(c.predicted, c.measures)} | {_pct(c.error)}{mark} | {c.target:.0%} | {c.split} |")
    return "\n".join(lines)


def main() -> None:
    results = comparisons()
    print("## Published measurements: the calculator against figures measured on GPUs by others\n")
    print(summary(results) + "\n")
    print(table(results) + "\n")
    print("Judged rows outside their target:\n")
    for c in results:
        if c.judged and not c.within_target:
            print(f"- {c.id} ({_pct(c.error)}): {c.known_miss or 'no cause recorded'}")
    print("\nRows not judged:\n")
    for c in results:
        if not c.judged:
            print(f"- {c.id} ({c.measures}, predicted {_figure(c.predicted, c.measures)} against "
                  f"{_figure(c.measured, c.measures)}): {c.reason}")


if __name__ == "__main__":
    main()
