""""Copy as answer" in every chapter with a calculator that answers a question: the page's
answer is the CLI's `--markdown` answer for the command it names, word for word, in English
and in French, and its verdict carries the figures the page shows beside it."""

from __future__ import annotations

from functools import cache
import re
import shlex

import pytest

from calculator.core.messages import text
from tests.apptest import open_page
from tests.cli_runner import run_cli

CASE = {"model": "llama-3-8b", "gpu": "rtx4090"}


@cache
def chapter_page(slug: str, lang: str, **query: str):
    """The chapter run once per address for this file: its tests only read the page (several
    answers of fine-tuning, slow-model and oom come from one run, as a reader sees them)."""
    return open_page(slug, lang, **query)


def cli_markdown(command_line: str, lang: str) -> str:
    argv = shlex.split(command_line)[3:]  # after "python -m calculator"
    done = run_cli(*argv, "--markdown", "--lang", lang, env={"GUIDE_URL": None})  # in this process
    assert done.returncode == 0, done.stderr
    return done.stdout


def plain(value: str) -> str:
    return value.replace("\u202f", " ").replace("\u00a0", " ")


def page_answers(at) -> dict[str, str]:
    """The page's answers by the command they reproduce."""
    answers = {}
    for block in at.code:
        if block.language == "markdown":
            line = re.findall(r"```bash\n(.*?)\n```", block.value, re.S)[-1]
            answers[shlex.split(line)[3]] = block.value
    return answers


def section_answer(at, anchor: str) -> str:
    """The answer of the calculator in section `anchor` (a chapter may answer with one command twice)."""
    return next(block.value for block in at.code if block.language == "markdown" and f"#{anchor}\n" in block.value)


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def any_section(answer: str) -> str:
    """The answer with its link's section left out: the page links to the section the reader
    is on (the home page's is the bare address), the CLI to the command's own."""
    return re.sub(r"(http://localhost:8501)/[a-z-]*\?(\S*)#[a-z-]+", r"\1/?\2", answer).strip()


def check_same_as_cli(answer: str, lang: str) -> str:
    line = re.findall(r"```bash\n(.*?)\n```", answer, re.S)[-1]
    assert any_section(cli_markdown(line, lang)) == any_section(answer)  # the command's answer, word for word
    assert f"lang={lang}" in answer and "model=llama-3-8b" in answer and "gpu=rtx4090" in answer
    return plain(answer.split("\n\n")[0])


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_parallelism_answers(lang):
    at = chapter_page("parallelism", lang, **CASE)
    assert not at.exception
    answers = page_answers(at)
    verdict = check_same_as_cli(answers["tensor-parallel"], lang)
    for key in ("per_gpu", "replicated", "one_gpu"):
        assert plain(metric(at, text(f"parallelism.{key}", lang))) in verdict
    verdict = check_same_as_cli(answers["pipeline"], lang)
    column = text("parallelism.col_bytes", lang)
    stages = [plain(v) for frame in at.dataframe if column in frame.value for v in frame.value[column]]
    assert len(stages) == 4 and any(f"**{size}**" in verdict for size in stages)  # the largest stage, in bold


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_slow_model_data_parallel_answer(lang):
    at = chapter_page("slow-model", lang, **CASE)
    assert not at.exception
    verdict = check_same_as_cli(page_answers(at)["data-parallel"], lang)
    assert plain(metric(at, text("data_parallel.one_gpu", lang))) in verdict
    speedup = plain(metric(at, text("data_parallel.speedup", lang)))  # ×8.0 on the page, ×8.00 in the answer
    assert re.search(re.escape(speedup) + r"\d?\*\*", verdict)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_quantization_answer(lang):
    at = chapter_page("quantization", lang, **CASE)
    assert not at.exception
    verdict = check_same_as_cli(page_answers(at)["quantize"], lang)
    table = next(frame.value for frame in at.dataframe if text("quantization.col_format", lang) in frame.value)
    totals = dict(zip(table[text("quantization.col_format", lang)], table[text("quantization.col_total", lang)]))
    for name in ("bfloat16", "bnb-int8", "bnb-nf4", "Q4_K"):
        assert f"{name} {plain(totals[name])}" in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_fine_tuning_answer(lang):
    at = chapter_page("fine-tuning", lang, **CASE)
    assert not at.exception
    verdict = check_same_as_cli(section_answer(at, "training-memory"), lang)
    assert plain(metric(at, text("training_memory.ours", lang))) in verdict
    assert "NVIDIA GeForce RTX 4090" in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_oom_longest_context_answer(lang):
    at = chapter_page("oom", lang, **CASE)
    assert not at.exception
    answer = next(block.value for block in at.code if block.language == "markdown" and "#context-length" in block.value)
    assert "/oom?" in answer  # the section the reader is on
    verdict = check_same_as_cli(answer, lang)
    tokens = re.search(r"\*\*\d+ [^*]*? ([\d  ,]+) tokens\*\*", verdict).group(1)  # the longest context
    said = [plain(m.value) for m in list(at.success) + list(at.warning)]
    assert any(tokens in message for message in said)  # the page's own longest context
    breakdown = next(plain(m.value) for m in at.markdown if tokens in plain(m.value) and "KV" in m.value)
    sizes = re.findall(r"\d[\d ,.]* (?:GiB|MiB|Gio|Mio)", breakdown)
    assert len(sizes) == 3 and all(size in verdict for size in sizes)  # weights, KV cache, activations at that context


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_cpu_offloading_device_map_answer(lang):
    at = chapter_page("cpu-offloading", lang, model="llama-3-8b", gpu="rtx4090", om_gpu_gib="8")
    assert not at.exception
    answer = page_answers(at)["offload"]
    assert "--gpu-memory 8GiB" in answer and "device_map" in answer  # the reader's budget, the loading code
    verdict = check_same_as_cli(answer, lang)
    for key in ("on_gpus", "cpu_needed", "on_disk"):
        assert plain(metric(at, text(f"offload.{key}", lang))) in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_slow_model_batch_size_answer(lang):
    at = chapter_page("slow-model", lang, **CASE)
    assert not at.exception
    verdict = check_same_as_cli(page_answers(at)["speed"], lang)
    column = text("batch_size.col_throughput", lang)
    batch, per_token = text("batch_size.col_batch", lang), text("batch_size.col_tpot", lang)
    table = next(frame.value for frame in at.dataframe if per_token in frame.value and batch in frame.value)
    fitting = table[table[text("batch_size.col_fits", lang)] == "✓"]
    best = fitting.iloc[fitting[batch].astype(int).argmax()]  # the largest batch that fits
    assert f"**{plain(best[column])} tokens/s**" in verdict
    assert f"{plain(best[per_token])} ms" in verdict
    assert f"**{best[batch]}**" in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_serving_fewest_gpus_answer(lang):
    at = chapter_page("serving", lang, model="llama-3-8b", gpu="rtx4090", users="64", context="8192")
    assert not at.exception
    answer = next(block.value for block in at.code if block.language == "markdown" and "--users 64" in block.value)
    verdict = check_same_as_cli(answer, lang)
    assert "64" in verdict and "NVIDIA GeForce RTX 4090" in verdict
    column = text("serving.col_gpus", lang)
    table = next(frame.value for frame in at.dataframe if column in frame.value)
    fewest = min(int(plain(v).replace(" ", "").replace(",", "")) for v in table[column] if plain(v)[0].isdigit())
    advice = plain(answer).split("\n\n")[2]  # what to do: the page's fewest GPUs
    assert f"{fewest} × NVIDIA GeForce RTX 4090" in advice and fewest > 1


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_oom_largest_batch_answer(lang):
    at = chapter_page("oom", lang, model="llama-3-8b", gpu="rtx4090", lb_longest="8192")
    assert not at.exception
    answer = next(block.value for block in at.code if block.language == "markdown" and "#batch-size" in block.value)
    verdict = check_same_as_cli(answer, lang)
    from calculator.core.units import format_count

    shown = plain(metric(at, text("largest_batch.metric_longest", lang, tokens=format_count(8192, lang))))
    assert f"**{shown} " in verdict and f" {plain(format_count(8192, lang))} tokens**" in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_home_quick_check_answer(lang):
    at = chapter_page("", lang, model="llama-3-8b", gpu="rtx4090", dtype="float32")
    assert not at.exception
    answer = page_answers(at)["estimate"]
    assert "--gpu rtx4090 --dtypes float32" in answer  # estimate --gpu: its verdict is the page's
    verdict = check_same_as_cli(answer, lang)
    for key in ("rule", "exact", "capacity"):
        assert plain(metric(at, text(f"quick_check.{key}", lang))) in verdict
    assert at.error and ("**not fit**" if lang == "en" else "**tiennent pas**") in verdict  # the page's verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_fine_tuning_lora_answer(lang):
    at = chapter_page("fine-tuning", lang, **CASE)
    assert not at.exception
    answer = section_answer(at, "lora")
    assert "--compare-methods" in answer and "--lora-rank 16 --lora-targets all-linear" in answer
    verdict = check_same_as_cli(answer, lang)
    peak, largest = text("training.column_peak", lang), text("lora.col_largest", lang)
    trained = text("lora.col_trained", lang)  # the methods' table, not the loss calculator's
    table = next(frame.value for frame in at.dataframe if largest in frame.value and trained in frame.value)
    assert len(table) == 3
    for size, most in zip(table[peak], table[largest]):  # full fine-tuning, LoRA, QLoRA: peaks and micro-batches
        assert f"**{plain(size)}**" in verdict and f"**{most}**" in verdict


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_fine_tuning_zero_answer(lang):
    at = chapter_page("fine-tuning", lang, **CASE)
    assert not at.exception
    answer = section_answer(at, "zero")
    assert "--gpus 16 --zero 3" in answer  # the page's stage, at the largest count its chart shows
    verdict = check_same_as_cli(answer, lang)
    stage, peak = text("zero.stage", lang), text("training.column_peak", lang)
    table = next(frame.value for frame in at.dataframe if text("zero.col_paper", lang) in frame.value)
    at_stage_3 = plain(table[table[stage].astype(str) == "3"][peak].iloc[0])
    assert f"**{at_stage_3}**" in verdict  # one GPU's peak with ZeRO-3 over 16 GPUs, as the table shows it


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_fine_tuning_distributed_answer(lang):
    at = chapter_page("fine-tuning", lang, **CASE)
    assert not at.exception
    answer = section_answer(at, "distributed")
    assert "--accumulation 8" in answer  # the page's accumulation
    check_same_as_cli(answer, lang)
    said = [re.search(r"\*\*(\d+)\*\*, (?:with|avec) (\S+)\.", plain(m.value)) for m in at.success]
    count, strategy = next(found for found in said if found).groups()  # the page's fewest GPUs
    assert f"**{count}**, {'with' if lang == 'en' else 'avec'} {strategy}." in plain(answer)
    offload = [re.search(r"\*\*(\d+)\*\*", plain(m.value)).group(1) for m in at.info if "ZeRO-3" in m.value]
    assert [f"**{n}** GPU" in plain(answer) for n in offload] == [True] * len(offload)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_serving_concurrency_answer(lang):
    at = chapter_page("serving", lang, model="llama-3-8b", gpu="rtx4090", svc_prefix="1024")
    assert not at.exception
    answer = section_answer(at, "concurrency")
    assert "--shared-prefix 1024" in answer
    verdict = check_same_as_cli(answer, lang)
    assert f"**{plain(metric(at, text('serving.metric_sequences', lang)))} " in verdict  # sequences at once
    assert plain(metric(at, text("serving.metric_per_token", lang))) in plain(answer)  # the KV cache per token


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_serving_settings_answer(lang):
    at = chapter_page("serving", lang, model="llama-3-8b", gpu="rtx4090", sve_seqs="64", sve_util="0.85")
    assert not at.exception
    answer = section_answer(at, "engine-settings")
    assert "--gpu-memory-utilization 0.85 --max-num-seqs 64" in answer  # the reader's flags
    verdict = check_same_as_cli(answer, lang)
    pool, sequences = text("serving.metric_pool", lang), text("serving.metric_sequences", lang)
    shown = [plain(m.value) for m in at.metric if m.label in (pool, sequences)]
    assert f"**{shown[-2]}**" in verdict and f"**{shown[-1]} " in verdict  # this calculator's pool and sequences


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_slow_model_precision_answer(lang):
    at = chapter_page("slow-model", lang, **CASE)
    assert not at.exception
    answer = section_answer(at, "precision")
    verdict = check_same_as_cli(answer, lang)
    dtype, speed, fits = text("common.dtype", lang), text("batch_size.col_throughput", lang), text("precision.col_fits", lang)
    table = next(frame.value for frame in at.dataframe if text("precision.col_peak", lang) in frame.value)
    plain_dtypes = table[~table[dtype].isin(["bnb-nf4", "gptq-4bit"])]  # the command's precisions
    assert len(plain_dtypes) == 5
    assert ", ".join(f"{row[dtype]} {plain(row[speed])}" for _, row in plain_dtypes.iterrows()) in verdict
    fitting = ", ".join(plain_dtypes[plain_dtypes[fits] == "✓"][dtype]) or "—"
    assert f"**{fitting}**" in verdict  # the page's ✓ marks


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_memory_estimate_exact_count_answer(lang):
    """memory-estimate#exact-count answers with `estimate` over the precisions of its table: the
    command's answer word for word, and its verdict carries the table's float32 total."""
    from calculator.models.seam import catalog_model
    from calculator.memory.estimate import rows_for
    from guide.format import format_bytes

    at = chapter_page("memory-estimate", lang, model="llama-3-8b")
    assert not at.exception
    answer = page_answers(at)["estimate"]  # the page's one estimate answer
    line = re.findall(r"```bash\n(.*?)\n```", answer, re.S)[-1]
    assert any_section(cli_markdown(line, lang)) == any_section(answer)  # the command's answer, word for word
    rows = rows_for(catalog_model("llama-3-8b").summary)
    assert line.split("--dtypes ")[1].split()[: len(rows)] == [row.dtype for row in rows]
    float32 = next(row for row in rows if row.dtype == "float32")
    assert plain(format_bytes(float32.total_bytes, lang)) in plain(answer.split("\n\n")[0])
