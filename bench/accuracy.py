"""Measured, not claimed: the calculator against real memory, for every kind of estimate.

    python -m bench.accuracy [--quick] [--cpu] [--budget SECONDS] [--models NAME ...] [--out DIR]

Builds real transformers models with random weights from catalog configs (nothing is
downloaded), runs them, measures, and compares with the calculator's prediction for the same
settings (calculator/answers/accuracy.py, through the functions the guide and the CLI use):

- load: the bytes held once the model is built on the device;
- inference: the peak of `generate` and of a full-sequence forward scored as a log-likelihood,
  on a grid of batch sizes and context lengths (bench/measure.py's run_inference);
- training: the peak of the second of two full steps (forward, backward, AdamW step,
  zero_grad) in mixed precision (float32 weights, bfloat16 autocast: the Trainer's bf16=True),
  with and without activation checkpointing, and with LoRA through peft.

On a CUDA GPU (chosen automatically; --cpu forces the CPU) memory is
torch.cuda.max_memory_allocated() after torch.cuda.reset_peak_memory_stats(), models are
initialised on the GPU in bfloat16 (float32 for AMP training), and the memory outside the
caching allocator (the CUDA context) is reported apart. On the CPU it is LiveBytes, the
tracker of live tensor bytes. Each run writes one JSON file into bench/results/ (see
calculator/answers/accuracy.py) after every model, so a run stopped early keeps what it measured.

The split is fixed here, before any run: the models in CHECK_MODELS and every training step
with activation checkpointing are for checking only; nothing in the calculator may be changed
by looking at them. --budget stops starting new models once that many seconds have passed
(the GPU run is planned to finish well inside 10 minutes); --quick runs one tiny model for
the tests.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
import json
import os
from pathlib import Path
import platform
import sys
import time

from bench import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent
TEST_CONFIGS = ROOT / "tests" / "configs"

# Models only ever used to check (decided before the first run, never used to fit anything).
CHECK_MODELS = {"tiny-gemma2", "pythia-160m", "llama-3.2-1b", "llama-3.2-1b-2-layers", "phi-2", "mistral-7b-v0.1"}


@dataclass(frozen=True)
class Model:
    name: str
    catalog: str = ""  # a catalog key: its config, with `overrides` on top
    overrides: dict = field(default_factory=dict)
    test_config: str = ""  # or one of the tiny configs of tests/configs

    def config(self) -> dict:
        if self.test_config:
            return json.loads((TEST_CONFIGS / f"{self.test_config}.json").read_text(encoding="utf-8"))
        from calculator.models import catalog

        return {**catalog.config(self.catalog), **self.overrides}

    def source(self) -> dict:
        return {"catalog": self.catalog, "overrides": self.overrides, "config": self.config()}


@dataclass(frozen=True)
class Group:
    """One model built once in one dtype: its load, then inference runs on it."""

    model: Model
    dtype: str
    attention: str = "sdpa"
    runs: tuple[tuple[str, int, int], ...] = ()  # (mode, batch, context)


@dataclass(frozen=True)
class Training:
    model: Model
    options: dict  # TrainingSetup fields besides the device's defaults


@dataclass(frozen=True)
class Grid:
    groups: tuple[Group, ...]
    training: tuple[Training, ...]


def _runs(batches, contexts, modes=("generate", "loglikelihood")) -> tuple[tuple[str, int, int], ...]:
    return tuple((mode, b, c) for mode in modes for b in batches for c in contexts)


TINY_LLAMA = Model("tiny-llama", test_config="tiny-llama")
TINY_GEMMA2 = Model("tiny-gemma2", test_config="tiny-gemma2")
TINY_MIXTRAL = Model("tiny-mixtral", test_config="tiny-mixtral")
GPT2 = Model("gpt2", "gpt2")
T5_SMALL = Model("t5-small", "t5-small")
PYTHIA = Model("pythia-160m", "pythia-160m")
QWEN_05B = Model("qwen2.5-0.5b", "qwen2.5-0.5b")
LLAMA_1B = Model("llama-3.2-1b", "llama-3.2-1b")
LLAMA_1B_2L = Model("llama-3.2-1b-2-layers", "llama-3.2-1b", {"num_hidden_layers": 2})
PHI_2 = Model("phi-2", "phi-2")
MISTRAL_7B = Model("mistral-7b-v0.1", "mistral-7b-v0.1")

AMP = {"precision": "amp", "optimizer": "adamw"}
CHECKPOINTING = {**AMP, "checkpointing": "full"}
LORA = {**AMP, "method": "lora", "lora_rank": 16}


def _step(batch: int, sequence: int, options: dict) -> dict:
    return {**options, "micro_batch": batch, "sequence": sequence}


QUICK = Grid(
    groups=(Group(TINY_LLAMA, "float32", runs=_runs((2,), (32,))),),
    training=tuple(Training(TINY_LLAMA, _step(2, 32, o)) for o in (AMP, CHECKPOINTING, LORA)),
)

# The CPU grid: 2 shared cores and about 20 GiB, so the largest models are loaded and run in
# bfloat16 and Llama-3.2-1B is trained with two of its sixteen layers.
CPU = Grid(
    groups=(
        *(Group(m, "float32", runs=_runs((1, 4), (64, 256))) for m in (TINY_LLAMA, TINY_GEMMA2, TINY_MIXTRAL)),
        *(Group(m, "bfloat16", "eager", runs=_runs((2,), (128,))) for m in (TINY_LLAMA, TINY_GEMMA2, TINY_MIXTRAL)),
        Group(GPT2, "float32", runs=_runs((1, 4), (128, 512))),
        Group(GPT2, "bfloat16", "eager", runs=_runs((2,), (256,))),
        Group(T5_SMALL, "float32", runs=_runs((1, 4), (128, 512))),
        Group(T5_SMALL, "bfloat16", runs=_runs((2,), (256,))),
        Group(PYTHIA, "float32", runs=_runs((1, 4), (128, 512))),
        Group(PYTHIA, "bfloat16", "eager", runs=_runs((2,), (256,))),
        Group(QWEN_05B, "bfloat16", runs=_runs((1, 4), (128, 512))),
        Group(QWEN_05B, "float32", runs=_runs((2,), (256,), ("generate",))),
        Group(LLAMA_1B, "bfloat16", runs=_runs((1, 2), (256, 1024))),
    ),
    training=(
        *(Training(m, _step(2, 64, o)) for m in (TINY_LLAMA, TINY_GEMMA2, TINY_MIXTRAL) for o in (AMP, CHECKPOINTING)),
        *(Training(m, _step(4, 128, LORA)) for m in (TINY_LLAMA, TINY_GEMMA2)),
        Training(GPT2, _step(1, 256, AMP)), Training(GPT2, _step(2, 512, CHECKPOINTING)),
        Training(GPT2, _step(2, 256, LORA)),
        Training(T5_SMALL, _step(2, 128, AMP)), Training(T5_SMALL, _step(2, 128, LORA)),
        Training(PYTHIA, _step(1, 256, AMP)), Training(PYTHIA, _step(2, 256, LORA)),
        Training(QWEN_05B, _step(1, 128, AMP)), Training(QWEN_05B, _step(2, 256, {**LORA, "checkpointing": "full"})),
        Training(QWEN_05B, _step(1, 256, LORA)),
        Training(LLAMA_1B_2L, _step(1, 256, AMP)), Training(LLAMA_1B, _step(1, 256, LORA)),
    ),
)

# The GPU grid: ~124M to ~7B parameters on one GPU of 80 GiB or more, a few minutes.
CUDA = Grid(
    groups=(
        Group(GPT2, "bfloat16", runs=_runs((1, 8), (256, 1024))),
        Group(QWEN_05B, "bfloat16", runs=_runs((1, 8), (1024, 4096))),
        Group(LLAMA_1B, "bfloat16", runs=_runs((1, 8), (1024, 4096))),
        Group(PHI_2, "bfloat16", runs=_runs((1, 8), (512, 2048))),
        Group(MISTRAL_7B, "bfloat16", runs=_runs((1, 8), (1024, 4096))),
    ),
    training=(
        *(t for m in (GPT2, QWEN_05B, LLAMA_1B) for t in (
            Training(m, _step(4, 1024, AMP)), Training(m, _step(8, 1024, CHECKPOINTING)),
            Training(m, _step(4, 1024, LORA)))),
        Training(PHI_2, _step(2, 1024, AMP)), Training(PHI_2, _step(4, 1024, LORA)),
        Training(MISTRAL_7B, _step(2, 1024, LORA)), Training(MISTRAL_7B, _step(4, 2048, {**LORA, "checkpointing": "full"})),
    ),
)


def split_of(model: str, kind: str, settings: dict) -> str:
    if model in CHECK_MODELS or (kind == "training" and settings.get("checkpointing", "none") != "none"):
        return "check"
    return "development"


# -- measuring ----------------------------------------------------------------------------

def _meter(device: str):
    from bench.measure import CpuMeter, CudaMeter

    return CpuMeter() if device == "cpu" else CudaMeter()


def _new_tokens(config: dict, mode: str, context: int) -> int:
    """generate: one new token for a decoder (the prefill is its peak); an encoder-decoder's
    decoder runs `context` steps, filling the cache the calculator counts."""
    return context if mode == "generate" and config.get("is_encoder_decoder") else 1


def measure_group(group: Group, device: str, with_load: bool) -> list[tuple[str, dict, int, dict]]:
    """(kind, settings, measured bytes, detail) for the group's load and its inference runs."""
    import torch

    from bench.measure import dummy_inputs, random_model, run_inference

    config = group.model.config()
    out = []
    with _meter(device) as meter:
        started = time.perf_counter()
        model = random_model(config, group.dtype, group.attention, device).eval()
        if with_load:
            out.append(("load", {"dtype": group.dtype}, meter.held(),
                        {"seconds": round(time.perf_counter() - started, 2)}))
        for mode, batch, context in group.runs:
            started = time.perf_counter()
            ids, mask = dummy_inputs(model, batch, context)
            meter.reset_peak()
            cache = run_inference(model, ids, mask, mode, _new_tokens(config, mode, context))
            peak = meter.peak()
            del ids, mask
            settings = {"dtype": group.dtype, "attention": group.attention, "mode": mode, "batch": batch,
                        "context": context}
            out.append(("inference", settings, peak, {"measured_cache_bytes": cache,
                                                      "reserved_peak_bytes": meter.reserved_peak(),
                                                      "seconds": round(time.perf_counter() - started, 2)}))
        del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def training_settings(training: Training, device: str) -> dict:
    from calculator.training import TrainingSetup

    # the optimizer PyTorch runs by default on a CPU (a loop over tensors); the Trainer's fused AdamW on a GPU
    impl = "for-loop" if device == "cpu" else "fused"
    return asdict(TrainingSetup(**{"optimizer_impl": impl, **training.options, "device": device}))


def measure_training(training: Training, device: str) -> tuple[int, dict]:
    """Peak of the second training step (the optimizer states exist), with the first's."""
    import torch

    from bench.measure import prepare_training, random_model, training_dtype, training_step, training_tokens
    from calculator.training import TrainingSetup

    setup = TrainingSetup(**training_settings(training, device))
    started = time.perf_counter()
    peaks = []
    with _meter(device) as meter:
        model = random_model(training.model.config(), training_dtype(setup), setup.attention, device)
        model, optimizer = prepare_training(model, setup)
        generator = torch.Generator().manual_seed(1)
        for _ in range(2):
            ids = training_tokens(model, setup, generator)
            meter.reset_peak()
            training_step(model, optimizer, ids, setup)
            peaks.append(meter.peak())
            del ids
        reserved = meter.reserved_peak()
        del model, optimizer
    if device == "cuda":
        torch.cuda.empty_cache()
    return peaks[1], {"first_step_bytes": peaks[0], "reserved_peak_bytes": reserved,
                      "seconds": round(time.perf_counter() - started, 2)}


# -- one run ------------------------------------------------------------------------------

def device_info(device: str) -> dict:
    import torch

    if device == "cuda":
        from bench.measure import cuda_outside_allocator_bytes

        props = torch.cuda.get_device_properties(0)
        return {"type": "cuda", "name": torch.cuda.get_device_name(0), "memory_bytes": props.total_memory,
                "cuda": torch.version.cuda, "cuda_context_bytes": cuda_outside_allocator_bytes(),
                "measure": "torch.cuda.max_memory_allocated() after reset_peak_memory_stats()"}
    return {"type": "cpu", "name": _cpu_name(), "cores": os.cpu_count(), "memory_bytes": _host_memory(),
            "cuda_context_bytes": None,
            "measure": "bench.measure.LiveBytes (live tensor bytes, a TorchDispatchMode)"}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def versions() -> dict:
    import accelerate
    import peft
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "accelerate": accelerate.__version__}


class Run:
    """One run of the harness: measures job after job and rewrites its result file after each."""

    def __init__(self, grid_name: str, device: str, out_dir: Path, budget: float | None, command: str) -> None:
        self.device, self.budget = device, budget
        self.started = time.perf_counter()
        now = datetime.now(UTC)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / f"accuracy-{device}-{grid_name}-{now:%Y%m%d-%H%M%S}.json"
        self.record = {"schema": 1, "harness": "bench.accuracy", "command": command, "grid": grid_name,
                       "started": now.isoformat(timespec="seconds"), "complete": False, "seconds": 0,
                       "device": device_info(device), "versions": versions(), "models": {}, "rows": [],
                       "skipped": []}
        self._resolved = {}

    def out_of_time(self) -> bool:
        return self.budget is not None and time.perf_counter() - self.started > self.budget

    def _model(self, model: Model):
        from calculator.answers.accuracy import resolve_source

        if model.name not in self._resolved:
            source = model.source()
            resolved = resolve_source(model.name, source)
            self.record["models"][model.name] = {**source, "parameters": resolved.summary.parameters}
            self._resolved[model.name] = (resolved, source["config"])
        return self._resolved[model.name]

    def add(self, model: Model, kind: str, settings: dict, measured: int, detail: dict) -> dict:
        from calculator.answers.accuracy import predict, relative_error, within_target

        resolved, config = self._model(model)
        predicted, parts = predict(kind, resolved, config, settings)
        error = relative_error(predicted, measured)
        row = {"kind": kind, "model": model.name, "settings": settings, "split": split_of(model.name, kind, settings),
               "measured_bytes": measured, "predicted_bytes": predicted, "error": round(error, 6),
               "within_target": within_target(kind, error), "detail": {**parts, **detail}}
        self.record["rows"].append(row)
        return row

    def skip(self, what: str) -> None:
        self.record["skipped"].append(what)

    def save(self, complete: bool = False) -> None:
        self.record["complete"] = complete
        self.record["seconds"] = round(time.perf_counter() - self.started, 1)
        self.path.write_text(json.dumps(self.record, indent=1) + "\n", encoding="utf-8")


def run(grid_name: str = "full", device: str | None = None, out_dir: Path = RESULTS_DIR,
        budget: float | None = None, models: tuple[str, ...] = (), command: str = "", echo=print) -> Path:
    """Measure a grid on a device (None: CUDA if there is one) and write its result file.
    grid_name: quick (the tiny grid), full (the device's grid) or partial (some of its models)."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    grid = QUICK if grid_name == "quick" else (CUDA if device == "cuda" else CPU)
    chosen = lambda m: not models or m.name in models  # noqa: E731
    current = Run(grid_name, device, out_dir, budget, command)
    loaded = set()
    jobs = [(g.model, g) for g in grid.groups] + [(t.model, t) for t in grid.training]
    for model, job in jobs:
        if not chosen(model):
            continue
        label = _label(job)
        if current.out_of_time():
            current.skip(label)
            continue
        if isinstance(job, Group):
            first = (model.name, job.dtype) not in loaded
            loaded.add((model.name, job.dtype))
            rows = [current.add(model, *measured) for measured in measure_group(job, device, first)]
        else:
            measured, detail = measure_training(job, device)
            rows = [current.add(model, "training", training_settings(job, device), measured, detail)]
        current.save()
        for row in rows:
            echo(_line(row))
    current.save(complete=True)
    return current.path


def _label(job) -> str:
    if isinstance(job, Group):
        return f"{job.model.name} {job.dtype} {job.attention}: load and {len(job.runs)} inference runs"
    options = job.options
    return (f"{job.model.name} training {options.get('method', 'full')} {options['precision']} "
            f"checkpointing {options.get('checkpointing', 'none')} b{options['micro_batch']} s{options['sequence']}")


def _line(row: dict) -> str:
    s = row["settings"]
    what = {"load": lambda: s["dtype"],
            "inference": lambda: f"{s['mode']} {s['batch']}x{s['context']} {s['dtype']} {s['attention']}",
            "training": lambda: f"{s['method']} {s['precision']} ckpt={s['checkpointing']} "
                                f"{s['micro_batch']}x{s['sequence']}"}[row["kind"]]()
    mark = "" if row["within_target"] else "  MISSED"
    return (f"{row['kind']:9} {row['model']:22} {what:42} {row['split']:11} measured {row['measured_bytes'] / 2**20:10.2f}"
            f" MiB  predicted {row['predicted_bytes'] / 2**20:10.2f} MiB  {row['error'] * 100:+6.2f}%{mark}")


def summary_table(path: Path) -> str:
    """The per-kind summary of a result file, as a markdown table for docs/benchmarks.md."""
    from calculator.answers.accuracy import read_run, summarize

    result = read_run(path)
    lines = ["| kind | split | cases | within target | median error | largest error |", "|---|---|---|---|---|---|"]
    for split in ("development", "check"):
        for s in summarize([r for r in result.rows if r.split == split]):
            lines.append(f"| {s.kind} (target {s.target:.1%}) | {split} | {s.cases} | {s.within} | "
                         f"{s.median_abs_error:.2%} | {s.largest_abs_error:.2%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tiny model, every kind (seconds; for the tests)")
    parser.add_argument("--cpu", action="store_true", help="measure on the CPU even when a CUDA GPU is there")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="start no new model after this many seconds (what is skipped is listed in the file)")
    parser.add_argument("--models", nargs="+", default=(), metavar="NAME", help="only these models of the grid")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder of the result files")
    args = parser.parse_args(argv or [])
    command = "python -m bench.accuracy " + " ".join(argv or [])
    grid = "quick" if args.quick else "partial" if args.models else "full"
    path = run(grid, "cpu" if args.cpu else None, args.out, args.budget, tuple(args.models), command.strip())
    print(f"\n{path}\n")
    print(summary_table(path))


if __name__ == "__main__":
    main(sys.argv[1:])
