"""The accuracy harness (bench/accuracy.py) on a tiny model, the committed result files, and
the estimator's accuracy section rendered from them."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest

from bench import RESULTS_DIR
from calculator.answers import accuracy
from calculator.answers.accuracy import (KINDS, TARGETS, latest_runs, predict, read_run, relative_error, resolve_source,
                                 summarize)
from guide.format import format_bytes
from guide.widgets import accuracy as accuracy_widget
from tests.apptest import chart_specs, open_page
from tests.cli_runner import run_cli
from tests.conftest import ROOT

LANGS = ("en", "fr")


def check_rows_are_consistent(run) -> None:
    for row in run.rows:
        assert row.measured_bytes > 0 and row.predicted_bytes > 0
        assert row.error == pytest.approx(relative_error(row.predicted_bytes, row.measured_bytes), abs=1e-6)
        assert row.within_target == (abs(row.error) <= TARGETS[row.kind])
        assert row.model in run.models


# -- the harness, on a tiny model ------------------------------------------------------------

@pytest.fixture(scope="module")
def quick_cpu_command(tmp_path_factory):
    """`python -m bench.accuracy --quick --cpu --out DIR`, run once in this process (its
    main(), as the command calls it): (the folder it wrote to, what it printed)."""
    from bench.accuracy import main

    out = tmp_path_factory.mktemp("results")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        main(["--quick", "--cpu", "--out", str(out)])
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def quick_cpu_run(quick_cpu_command):
    files = list(quick_cpu_command[0].glob("accuracy-cpu-quick-*.json"))
    assert len(files) == 1
    return read_run(files[0])


def test_quick_run_measures_every_kind_on_the_cpu(quick_cpu_run):
    run = quick_cpu_run
    assert run.complete and run.grid == "quick" and run.device_type == "cpu"
    assert {r.kind for r in run.rows} == set(KINDS)
    assert {"torch", "transformers", "peft", "accelerate", "python"} <= set(run.versions)
    training = [r for r in run.rows if r.kind == "training"]
    assert {(r.settings["method"], r.settings["checkpointing"]) for r in training} == {
        ("full", "none"), ("full", "full"), ("lora", "none")}
    assert all(r.settings["precision"] == "amp" for r in training)
    assert {r.settings["mode"] for r in run.rows if r.kind == "inference"} == {"generate", "loglikelihood"}
    # the split is a field of every row; checkpointing rows are kept for checking
    assert {r.split for r in training if r.settings["checkpointing"] == "full"} == {"check"}
    check_rows_are_consistent(run)


def test_quick_run_is_within_the_targets(quick_cpu_run):
    for row in quick_cpu_run.rows:
        assert row.within_target, (row.kind, row.settings, row.error)


def test_load_is_what_the_built_model_holds(quick_cpu_run):
    """The load measured by the tracker equals the storages of the model's own tensors."""
    from bench.measure import random_model

    source = quick_cpu_run.models["tiny-llama"]
    model = random_model(source["config"], "float32")
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in list(model.parameters()) + list(model.buffers())}
    load = next(r for r in quick_cpu_run.rows if r.kind == "load")
    assert load.measured_bytes == sum(storages.values())


def test_training_peak_grows_with_the_batch(tmp_path):
    """A measurement that must respond to its settings: twice the tokens, a larger peak."""
    from bench import accuracy as harness

    small = harness.measure_training(harness.Training(harness.TINY_LLAMA, harness._step(1, 32, harness.AMP)), "cpu")
    large = harness.measure_training(harness.Training(harness.TINY_LLAMA, harness._step(4, 64, harness.AMP)), "cpu")
    assert large[0] > small[0]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA GPU here")
def test_quick_run_on_a_cuda_gpu(tmp_path):
    """The CUDA path as it is (max_memory_allocated, the context apart), on the GPU there is."""
    from bench.accuracy import run

    result = read_run(run("quick", "cuda", tmp_path, echo=lambda line: None))
    assert result.complete and result.device_type == "cuda"
    assert result.device["cuda_context_bytes"] > 0 and result.device["memory_bytes"] > 0
    assert {r.kind for r in result.rows} == set(KINDS)
    check_rows_are_consistent(result)
    for row in result.rows:
        if row.kind == "load":  # the allocator rounds every tensor up to 512 bytes: never less
            assert row.measured_bytes >= row.predicted_bytes
        else:
            assert row.detail["reserved_peak_bytes"] >= row.measured_bytes


def test_harness_command_line(quick_cpu_command):
    """The command's own run (shared with the tests above: the harness runs once), and the
    command as a process: `python -m bench.accuracy` reads its arguments."""
    folder, printed = quick_cpu_command
    files = list(folder.glob("accuracy-cpu-quick-*.json"))
    assert len(files) == 1 and read_run(files[0]).complete
    assert "| training (target 5.0%) |" in printed
    usage = subprocess.run([sys.executable, "-m", "bench.accuracy", "--help"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert usage.returncode == 0 and "--quick" in usage.stdout, usage.stderr[-2000:]


# -- the committed result files --------------------------------------------------------------

def test_committed_cpu_results_exist_and_cover_every_kind():
    runs = {run.device_type: run for run in latest_runs(RESULTS_DIR)}
    assert "cpu" in runs, "no CPU result file in bench/results: run python -m bench.accuracy --cpu"
    run = runs["cpu"]
    assert run.complete and run.grid == "full" and not run.skipped
    assert {r.kind for r in run.rows} == set(KINDS)
    assert {r.split for r in run.rows} == {"development", "check"}
    check_rows_are_consistent(run)
    training = {(r.settings["method"], r.settings["checkpointing"]) for r in run.rows if r.kind == "training"}
    assert {("full", "none"), ("full", "full"), ("lora", "none")} <= training


@pytest.mark.parametrize("run", latest_runs(RESULTS_DIR), ids=lambda run: run.device_type)
def test_published_predictions_are_the_calculators_of_today(run):
    """Rerun python -m bench.accuracy when this fails: the calculator changed since."""
    resolved = {name: resolve_source(name, source) for name, source in run.models.items()}
    for row in run.rows:
        predicted, _ = predict(row.kind, resolved[row.model], run.models[row.model]["config"], row.settings)
        assert predicted == row.predicted_bytes, (row.model, row.kind, row.settings)


# -- reading result files --------------------------------------------------------------------

def result_file(directory, name: str, device: str = "cpu", started: str = "2026-01-01T00:00:00+00:00",
                grid: str = "full", rows=None, **extra) -> None:
    rows = rows if rows is not None else [
        {"kind": "load", "model": "m", "settings": {"dtype": "float32"}, "split": "development",
         "measured_bytes": 1000, "predicted_bytes": 1000, "error": 0.0, "within_target": True, "detail": {}}]
    data = {"schema": 1, "grid": grid, "started": started, "complete": True, "seconds": 12.0,
            "device": {"type": device, "name": f"a {device}", "cores": 2, "memory_bytes": 2**34,
                       "cuda_context_bytes": 500 * 2**20 if device == "cuda" else None, "measure": "a meter"},
            "versions": {"torch": "9.9", "transformers": "8.8", "peft": "7.7", "accelerate": "6.6", "python": "3.11"},
            "models": {"m": {"catalog": "", "overrides": {}, "config": {}, "parameters": 124_000_000}},
            "rows": rows, "skipped": [], **extra}
    (directory / name).write_text(json.dumps(data))


def test_the_latest_full_run_of_each_device_is_read(tmp_path):
    result_file(tmp_path, "a.json", started="2026-01-01T00:00:00+00:00")
    result_file(tmp_path, "b.json", started="2026-02-01T00:00:00+00:00")
    result_file(tmp_path, "c.json", started="2026-03-01T00:00:00+00:00", grid="quick")
    result_file(tmp_path, "d.json", device="cuda")
    (tmp_path / "e.json").write_text("{not json")
    result_file(tmp_path, "f.json", started="2026-04-01T00:00:00+00:00", rows=[{"kind": "load"}])
    result_file(tmp_path, "g.json", started="2026-05-01T00:00:00+00:00", schema=99)
    runs = latest_runs(tmp_path)
    assert [(r.device_type, r.path.name) for r in runs] == [("cpu", "b.json"), ("cuda", "d.json")]
    assert read_run(tmp_path / "e.json") is None and read_run(tmp_path / "missing.json") is None


def test_summary_by_hand():
    def row(kind, error):
        return accuracy.ResultRow(kind, "m", {}, "development", 100, round(100 * (1 + error)), error,
                                  abs(error) <= TARGETS[kind], {})
    rows = [row("inference", 0.01), row("inference", -0.03), row("inference", 0.08), row("load", 0.0)]
    summary = {s.kind: s for s in summarize(rows)}
    assert list(summary) == ["load", "inference"]
    assert (summary["inference"].cases, summary["inference"].within) == (3, 2)
    assert summary["inference"].median_abs_error == pytest.approx(0.03)
    assert summary["inference"].largest_abs_error == pytest.approx(0.08)


def test_cli_prints_the_latest_results():
    out = run_cli("accuracy", "--json")  # in this process (tests/cli_runner.py)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    runs = latest_runs(RESULTS_DIR)
    assert [r["file"] for r in data["runs"]] == [r.path.name for r in runs]
    assert [row["measured_bytes"] for row in data["runs"][0]["rows"]] == [r.measured_bytes for r in runs[0].rows]
    human = run_cli("accuracy", "--rows")
    assert human.returncode == 0 and "inference" in human.stdout and "GiB" in human.stdout


# -- the section in the estimator chapter ----------------------------------------------------

def widget_tables(at):
    """(summary table, rows table) of each run the accuracy widget shows."""
    frames = [d.value for d in at.dataframe]
    tables = [f for f in frames if len(f.columns) >= 7]
    return list(zip(tables[::2], tables[1::2]))


@pytest.mark.parametrize("lang", LANGS)
def test_section_shows_the_committed_results(lang):
    runs = latest_runs(RESULTS_DIR)
    at = open_page("estimator", lang)
    assert not at.exception
    tables = widget_tables(at)
    assert len(tables) == len(runs)
    for run, (summary, rows) in zip(runs, tables):
        assert len(rows) == len(run.rows)
        assert list(rows.iloc[:, 1]) == [r.model for r in run.rows]
        assert list(rows.iloc[:, 5]) == [format_bytes(r.measured_bytes, lang) for r in run.rows]
        assert list(rows.iloc[:, 6]) == [format_bytes(r.predicted_bytes, lang) for r in run.rows]
        assert [int(n) for n in summary.iloc[:, 2]] == [s.cases for s in summarize(run.rows)]
        captions = " ".join(c.value for c in at.caption)
        assert f"torch {run.versions['torch']}" in captions and f"transformers {run.versions['transformers']}" in captions
    charts = chart_specs(at)
    measured = {round(x, 6) for c in charts for trace in c["data"] for x in trace.get("x", [])
                if trace.get("mode") == "markers"}
    assert {round(r.measured_bytes / 2**20, 6) for r in runs[0].rows} <= measured


@pytest.mark.parametrize("lang", LANGS)
def test_section_filters_and_flags_missed_targets(lang, tmp_path, monkeypatch):
    missed = {"kind": "training", "model": "m", "split": "check", "measured_bytes": 2000, "predicted_bytes": 1800,
              "error": -0.1, "within_target": False, "detail": {},
              "settings": {"method": "lora", "precision": "amp", "lora_rank": 16, "micro_batch": 2, "sequence": 512,
                           "checkpointing": "full"}}
    kept = {"kind": "load", "model": "m", "settings": {"dtype": "bfloat16"}, "split": "development",
            "measured_bytes": 1000, "predicted_bytes": 1001, "error": 0.001, "within_target": True, "detail": {}}
    result_file(tmp_path, "cpu.json", rows=[kept, missed])
    result_file(tmp_path, "gpu.json", device="cuda", rows=[kept])
    monkeypatch.setattr(accuracy_widget, "RESULTS_DIR", tmp_path)
    at = open_page("estimator", lang)
    (summary, rows), (gpu_summary, gpu_rows) = widget_tables(at)
    assert len(rows) == 2 and len(gpu_rows) == 1
    missed_text = {"en": "✗ missed", "fr": "✗ manqué"}[lang]
    assert list(rows.iloc[:, 8]) == ["✓", missed_text]
    assert missed_text in summary.iloc[1, 6] and "1" in summary.iloc[1, 6]
    assert rows.iloc[1, 7] == {"en": "−10.00%", "fr": "−10,00\u202f%"}[lang]
    page = (" ".join(m.value for m in at.markdown) + " ".join(i.value for i in at.info)).replace("\u202f", " ")
    assert {"en": "Measured on the GPU", "fr": "Mesuré sur le GPU"}[lang] in page
    assert {"en": "500.00 MiB", "fr": "500,00 Mio"}[lang] in page  # the CUDA context, shown apart
    only_check = open_page("estimator", lang, acc_check="true")
    tables = widget_tables(only_check)
    assert len(tables) == 1 and len(tables[0][1]) == 1  # the GPU run has no check row left
    no_training = open_page("estimator", lang, acc_training="false")
    assert len(widget_tables(no_training)[0][1]) == 1


@pytest.mark.parametrize("lang", LANGS)
def test_section_says_when_nothing_was_measured_yet(lang, tmp_path, monkeypatch):
    monkeypatch.setattr(accuracy_widget, "RESULTS_DIR", tmp_path)
    at = open_page("estimator", lang)
    infos = " ".join(i.value for i in at.info)
    assert "python -m bench.accuracy" in infos and not widget_tables(at)
