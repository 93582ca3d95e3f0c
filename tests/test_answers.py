"""Paste-ready answers: `--markdown --lang en|fr` on every answering command, and "Copy as
answer" beside a calculator. The answer's figures are the command's JSON (and the page's), its
command line reproduces that JSON, its link writes every case value, French answers follow
the pages' typography; and the widget frame, not each widget, draws the share box."""

from __future__ import annotations

import json
from pathlib import Path
import re
import shlex
import subprocess
import sys

import pytest

from calculator.answers.markdown import ANSWERING
from calculator.core.typography import NNBSP
from calculator.core.units import format_bytes, format_count, format_number
from tests.apptest import open_page
from tests.cli_runner import run_cli
from tests.conftest import ROOT

CASES = {
    "estimate": ["gpt2", "--dtypes", "float16"],
    "inference": ["llama-3-8b", "--batch", "4", "--prompt", "1024", "--new-tokens", "256", "--gpu", "rtx4090"],
    "train": ["llama-3-8b", "--method", "qlora", "--gpu", "rtx4090", "--checkpointing", "full"],
    "serve": ["llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", "64"],
    "quantize": ["llama-3-8b", "--gpu", "rtx4090"],
    "llama-cpp": ["llama-3-8b", "--gpu", "rtx4090", "--context", "16384"],
    "offload": ["llama-3-8b", "--gpu", "rtx4090"],
    "tensor-parallel": ["llama-3-8b", "--degree", "2", "--gpu", "l4"],
    "pipeline": ["llama-3-8b", "--gpus", "2", "--gpu", "rtx4090", "--micro-batches", "8"],
    "data-parallel": ["llama-3-8b", "--gpu", "h100", "--samples", "5000", "--training", "--nodes", "2"],
    "speed": ["llama-3-8b", "--gpu", "h100"],
    "zero-offload": ["llama-3-8b", "--gpu", "rtx4090", "--tokens", "4096"],
    "multi-gpu": ["llama-3-8b", "--gpu", "l4", "--gpus", "2"],
}
# The figure of each answer's verdict sentence: (JSON path, how the answer writes it)
VERDICT_FIGURE = {
    "estimate": (("rows", 0, "total_bytes"), format_bytes), "inference": (("total_bytes",), format_bytes),
    "train": (("total_bytes",), format_bytes), "serve": (("kv_tokens",), format_count),
    "quantize": (("rows", 0, "total_bytes"), format_bytes), "llama-cpp": (("gpu_bytes",), format_bytes),
    "offload": (("gpu_bytes",), format_bytes),
    "tensor-parallel": (("per_gpu_bytes",), format_bytes), "pipeline": (("largest_bytes",), format_bytes),
    "data-parallel": (("speedup",), lambda value, lang="en": format_number(value, 2, lang)),
    "speed": (("largest_batch", "bfloat16"), format_count),
    "zero-offload": (("gpu_offload_bytes",), format_bytes), "multi-gpu": (("tensor_parallel", "peak_bytes"), format_bytes),
}


def cli(*argv: str) -> subprocess.CompletedProcess:
    """The command run in this process (tests/cli_runner.py)."""
    return run_cli(*argv)


def cli_process(*argv: str) -> subprocess.CompletedProcess:
    """The command as a real process: its exit status and stderr, not only what main() returns."""
    return subprocess.run([sys.executable, "-m", "calculator", *argv], capture_output=True, cwd=ROOT, timeout=300,
                          text=True)


def plain(text: str) -> str:
    return text.replace(NNBSP, " ").replace("\u00a0", " ")


def test_every_answering_command_is_covered():
    assert set(CASES) == set(ANSWERING)


@pytest.mark.parametrize("command", sorted(CASES))
def test_markdown_answer_carries_the_commands_figures_and_reproduces_it(command):
    data = json.loads(cli(command, *CASES[command], "--json").stdout)
    english = cli(command, *CASES[command], "--markdown")
    assert english.returncode == 0, english.stderr
    path, shown = VERDICT_FIGURE[command]
    value = data
    for step in path:
        value = value[step]
    first = english.stdout.split("\n\n")[0]
    assert shown(value) in first  # the verdict sentence has the engine's figure
    blocks = re.findall(r"```bash\n(.*?)\n```", english.stdout, re.S)
    reproduce = shlex.split(blocks[-1])
    assert reproduce[:4] == ["python", "-m", "calculator", command]
    assert json.loads(cli(*reproduce[3:], "--json").stdout) == data  # the command line gives the same answer
    link = re.search(r"(http://\S+)", english.stdout).group(1)
    assert "lang=en" in link and f"model={CASES[command][0]}" in link
    french = cli(command, *CASES[command], "--markdown", "--lang", "fr")
    assert french.returncode == 0 and "lang=fr" in french.stdout
    assert f"{NNBSP}:" in french.stdout and " :" not in french.stdout.split("```")[0]
    assert plain(shown(value, "fr")) in plain(french.stdout.split("\n\n")[0])
    assert not re.search(r"\d (GiB|MiB|KiB)\b", plain(french.stdout.split("```")[0]))  # French units: Gio, Mio


def test_answers_state_the_verdict_of_the_engine():
    train = cli("train", "llama-3-8b", "--method", "full", "--gpu", "t4", "--markdown").stdout
    assert "does **not fit** on the NVIDIA T4" in train
    serve = cli("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", "64", "--markdown").stdout
    data = json.loads(cli("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", "64",
                          "--json").stdout)
    assert data["max_concurrent_sequences"] < 64 and not data["fits"]  # 54 sequences of 8,192 tokens
    assert "64 users do **not fit**" in serve and "vllm serve meta-llama/Llama-3.1-8B" in serve
    best = min((lay for lay in data["layouts"] if lay["gpus"]), key=lambda lay: lay["gpus"])
    assert f"Fewest GPUs for these users: {best['gpus']} × NVIDIA H100 SXM" in serve
    assert "32 users **fit**" in cli("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", "32",
                                       "--markdown").stdout
    link = re.search(r"(http://\S+)", serve).group(1)
    for pair in ("model=llama-3.1-8b", "gpu=h100", "dtype=bfloat16", "context=8192", "users=64", "tensor=1"):
        assert pair in link  # every case value written out, defaults included


def test_markdown_refusals_are_one_line():
    for argv in (["estimate", "gpt2", "--markdown", "--lang", "de"], ["catalog", "--markdown"],
                 ["serve", "gpt2", "--gpu", "t4", "--engine", "llama.cpp", "--markdown"]):  # llama-cpp answers it
        done = cli_process(*argv)
        assert done.returncode == 2 and done.stderr.count("\n") == 1


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_copy_as_answer_shows_the_pages_figures(lang):
    at = open_page("serving", lang, model="llama-3.1-8b", gpu="h100")
    assert not at.exception
    answers = [c.value for c in at.code if c.language == "markdown" and "#serving-memory\n" in c.value]
    assert len(answers) == 1  # the serving-memory calculator's
    metrics = {}
    for metric in at.metric:  # the first of each label: the serving-memory calculator opens the chapter
        metrics.setdefault(metric.label, metric.value)
    pool_label = "KV cache pool per GPU" if lang == "en" else "Réservoir du cache KV par GPU"
    tokens_label = "Tokens in the pool" if lang == "en" else "Tokens dans le réservoir"
    verdict = plain(answers[0].split("\n\n")[0])
    assert plain(metrics[pool_label]) in verdict and plain(metrics[tokens_label]) in verdict
    assert f"lang={lang}" in answers[0] and "model=llama-3.1-8b" in answers[0] and "gpu=h100" in answers[0]
    assert "python -m calculator serve llama-3.1-8b --gpu h100" in answers[0]


def test_the_frame_draws_the_share_box():
    widgets = Path(ROOT / "guide" / "widgets")
    callers = [p.name for p in widgets.glob("*.py") if p.name != "__init__.py" and "share_box(" in p.read_text()]
    assert callers == []
    at = open_page("oom", "en")
    placed = (ROOT / "content" / "en" / "oom.md").read_text().count("[[widget:")
    assert sum(1 for p in at.get("popover") if p.proto.popover.label == "Share this result") == placed


def test_estimator_and_llama_cpp_answers_match_their_tables():
    at = open_page("estimator", "en", model="gpt2")
    answer = next(c.value for c in at.code if c.language == "markdown" and c.value.startswith("**"))
    table = at.dataframe[0].value
    assert f"**{table['Total (weights)'][0]}** in {table['Precision'][0]}" in answer
    assert "python -m calculator estimate gpt2 --dtypes" in answer and "/estimator?lang=en&model=gpt2" in answer
    at = open_page("cpu-offloading", "fr", model="llama-3.1-8b", gpu="h100")
    answer = next(c.value for c in at.code if c.language == "markdown" and "calculator llama-cpp" in c.value)
    on_gpu = next(m.value for m in at.metric if m.label == "Sur le GPU")
    assert plain(on_gpu) in plain(answer.split("\n\n")[0])
    assert "/cpu-offloading?lang=fr&model=llama-3.1-8b&gpu=h100" in answer and answer.rstrip().endswith("```")


# vLLM's and SGLang's own names for what the serve answer sets (vllm/engine/arg_utils.py,
# sglang/srt/server_args.py): a line with any other flag, or a flag without its value, would
# not start what was priced.
VLLM_VALUED = {"--dtype", "--tensor-parallel-size", "--data-parallel-size", "--max-model-len",
               "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens", "--kv-cache-dtype",
               "--cpu-offload-gb", "--quantization"}
SGLANG_VALUED = {"--model-path", "--dtype", "--tp", "--dp", "--context-length", "--mem-fraction-static",
                 "--quantization", "--kv-cache-dtype"}


def engine_flags(answer: str) -> dict[str, str]:
    """The engine command of a serve answer, read flag by flag (each with its value)."""
    line = re.search(r"```bash\n((?:vllm serve|python -m sglang).*?)\n```", answer, re.S).group(1)
    words = shlex.split(line)[3:]  # after "vllm serve MODEL" or "python -m sglang.launch_server"
    valued = VLLM_VALUED if line.startswith("vllm") else SGLANG_VALUED
    flags = dict(zip(words[::2], words[1::2]))
    assert set(flags) <= valued and len(words) % 2 == 0 and "None" not in flags.values(), line
    return flags


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_serve_answer_starts_the_layout_it_advises_with_every_priced_setting(engine):
    argv = ("serve", "llama-3.1-70b", "--gpu", "h100", "--context", "4096", "--users", "64", "--engine", engine)
    data = json.loads(cli(*argv, "--json").stdout)
    flags = engine_flags(cli(*argv, "--markdown").stdout)
    best = data["best_layout"]
    assert not data["fits"] and best["tensor"] > 1
    tensor, share = ("--tensor-parallel-size", "--gpu-memory-utilization") if engine == "vllm" else ("--tp", "--mem-fraction-static")
    assert flags[tensor] == str(best["tensor"]) and float(flags[share]) == data["gpu_memory_utilization"]
    if engine == "vllm":
        assert int(flags["--max-num-batched-tokens"]) == data["max_num_batched_tokens"]
        assert int(flags["--max-num-seqs"]) == data["max_num_seqs"] and flags["--max-model-len"] == "4096"


def test_a_serve_answer_that_fits_starts_the_readers_own_layout():
    argv = ("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", "16", "--tensor", "2")
    data = json.loads(cli(*argv, "--json").stdout)
    flags = engine_flags(cli(*argv, "--markdown").stdout)
    assert data["fits"] and flags["--tensor-parallel-size"] == "2" and "--data-parallel-size" not in flags
