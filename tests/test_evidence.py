"""The evidence readers on published samples (tests/data/evidence/, sources in sources.toml):
each kind recognised, its figures read as the sample prints them, compared with a case by the
serving engine, and wrong, truncated or hostile input refused cleanly and quickly."""

from __future__ import annotations

from pathlib import Path
import re
import shlex
import subprocess
import time
import tomllib

import pytest

from calculator.core.errors import CalculatorError
from calculator.answers.evidence import KINDS, MAX_BYTES, decode, read
from calculator.answers.evidence_compare import Case, card_for_total, compare
from calculator.answers.evidence_text import figure_rows, lines
from calculator.core.gpus import gpu
from calculator.models.seam import resolve
from calculator.serving.plan import serve
from tests import cli_runner

DATA = Path(__file__).parent / "data" / "evidence"
SOURCES = tomllib.loads((DATA / "sources.toml").read_text())
GIB, MIB = 2**30, 2**20


def sample(name: str) -> str:
    return (DATA / name).read_text()


def codes(comparison) -> list[str]:
    return [f.code for f in comparison.findings]


def finding(comparison, code: str) -> dict:
    return next(f.params for f in comparison.findings if f.code == code)


def test_every_sample_has_its_source_and_is_read_as_its_kind():
    files = {p.name for p in DATA.iterdir() if p.name != "sources.toml"}
    assert files == set(SOURCES)
    expected = {"vllm": "vllm-log", "sglang": "sglang-log", "nvidia-smi": "nvidia-smi",
                "accelerate": "accelerate-estimate", "memory-summary": "memory-summary", "oom": "oom-message"}
    for name, source in SOURCES.items():
        assert source["url"].startswith("https://") and source["what"]
        kind = next(kind for prefix, kind in expected.items() if name.startswith(prefix))
        assert read(sample(name)).kind == kind, name


# ---------------------------------------------------------------- vLLM

def test_vllm_blocks_are_tokens_of_sixteen():
    """vLLM PR #12569: 1,381 blocks and 'concurrency for 2048 tokens: 10.79x'. The block of
    16 tokens is an assumption the published concurrency confirms: 1381 x 16 / 2048 = 10.789."""
    figures = read(sample("vllm-v1-blocks.log")).figures
    assert figures["kv_blocks"] == 1381 and figures["block_tokens"] == 16
    assert figures["kv_tokens"] == 22_096
    assert figures["max_concurrency"] == 10.79 and figures["max_model_len"] == 2048
    assert round(figures["kv_tokens"] / figures["max_model_len"], 2) == figures["max_concurrency"]
    assert figures["weights_bytes"] == round(67.7229 * GIB)  # vLLM's "GB" there is bytes / 2^30


def test_vllm_tokens_with_thousands_separators():
    figures = read(sample("vllm-v1-tokens.log")).figures
    assert figures["kv_tokens"] == 2_042_016 and figures["max_model_len"] == 2048
    assert round(2_042_016 / 2048, 2) == figures["max_concurrency"] == 997.08


def test_vllm_v0_profiling_line():
    figures = read(sample("vllm-v0-profile.log")).figures
    assert figures["weights_bytes"] == round(14.9888 * GIB)
    assert figures["available_kv_bytes"] == round(3.81 * GIB) and figures["total_gpu_bytes"] == round(23.58 * GIB)
    assert figures["kv_blocks"] == 1952 and figures["kv_tokens"] == 1952 * 16
    assert figures["gpu_memory_utilization"] == 0.9 and figures["max_model_len"] == 20_000


def test_vllm_non_default_args():
    figures = read(sample("vllm-v1-nondefault.log")).figures
    assert figures["kv_tokens"] == 620_944 and figures["max_model_len"] == 262_144
    assert figures["tensor_parallel"] == 2 and figures["kv_cache_dtype"] == "fp8_e5m2"
    assert figures["max_concurrency"] == round(620_944 / 262_144, 2)


def test_vllm_available_memory_and_tokens():
    figures = read(sample("vllm-v1-available.log")).figures
    assert figures == {"available_kv_bytes": round(8.11 * GIB), "kv_tokens": 178_880}


def test_published_70b_weights_match_and_the_share_is_found():
    """PR #12569 ran Llama-3.1-70B w8a8 with --gpu-memory-utilization 0.98 (its command line,
    not in these log lines). The weights it loaded (67.72 GiB) are the calculator's int8
    weights, and the share the calculator infers from the pool is that 0.98 within 0.01."""
    model = resolve("llama-3.1-70b")
    # a January 2025 log: vLLM counted CUDA graphs outside the share then (the 0.19 accounting)
    comparison = compare(read(sample("vllm-v1-blocks.log")), Case(model=model, card=gpu("h100"), dtype="int8",
                                                                 engine_version="0.19"))
    assert "weights_match" in codes(comparison)
    assert abs(finding(comparison, "kv_implies_share")["share"] - 0.98) <= 0.011


def test_published_v0_log_is_told_apart_from_the_v1_accounting():
    """vLLM issue #10517 (V0, RTX 3090, Llama-3.1-8B, max_model_len 20000, utilization 0.90
    stated in the log): the weights are the calculator's, the pool is not (V0 profiled the whole
    20,000-token context), so the reader says the gap is not the share of the card."""
    case = Case(model=resolve("llama-3.1-8b"), card=gpu("rtx3090"))
    comparison = compare(read(sample("vllm-v0-profile.log")), case)
    assert "weights_match" in codes(comparison)
    assert "kv_differs" in codes(comparison) and "kv_implies_share" not in codes(comparison)


@pytest.fixture(scope="module")
def llama_h100():
    return Case(model=resolve("llama-3.1-8b"), card=gpu("h100"))


def _plan_tokens(case: Case, utilization: float | None) -> int:
    return serve(case.model, case.card, utilization=utilization, layouts=False).replica.kv_tokens


def test_a_log_at_the_defaults_says_so(llama_h100):
    tokens = _plan_tokens(llama_h100, None)
    comparison = compare(read(f"INFO GPU KV cache size: {tokens:,} tokens\n"), llama_h100)
    params = finding(comparison, "kv_matches_defaults")
    # current vLLM's default share, 0.92 (its engine arguments' documentation; 0.9 before)
    assert params["log_tokens"] == params["calc_tokens"] == tokens and params["share"] == 0.92
    found, advice = lines(read(f"GPU KV cache size: {tokens:,} tokens"), comparison, "en")
    assert any(f"{tokens:,} tokens" in line and "your settings are the defaults" in line for line in found)
    assert advice


def test_a_smaller_pool_names_the_share_of_the_card(llama_h100):
    tokens = _plan_tokens(llama_h100, 0.8)
    comparison = compare(read(f"GPU KV cache size: {tokens:,} tokens\n"), llama_h100)
    assert finding(comparison, "kv_implies_share")["share"] == 0.8
    assert "do_raise_share" in [a.code for a in comparison.advice]
    found, _ = lines(read(f"GPU KV cache size: {tokens:,} tokens"), comparison, "fr")
    assert any("gpu_memory_utilization` à 0,8" in line for line in found)


def test_a_stated_share_is_used(llama_h100):
    tokens = _plan_tokens(llama_h100, 0.8)
    log = (f"non-default args: {{'model': 'x', 'gpu_memory_utilization': 0.8}}\n"
           f"GPU KV cache size: {tokens:,} tokens\n")
    assert finding(compare(read(log), llama_h100), "kv_matches_stated")["share"] == 0.8


def test_a_log_that_stops_before_the_cache_says_so(llama_h100):
    comparison = compare(read(sample("vllm-v1-model-loading.log")), llama_h100)
    assert "kv_missing" in codes(comparison)


def test_without_a_case_the_reader_asks_for_one():
    comparison = compare(read(sample("vllm-v1-tokens.log")), Case())
    assert codes(comparison) == ["no_case"]


# ---------------------------------------------------------------- SGLang

def test_sglang_samples():
    tp8 = read(sample("sglang-tp8.log")).figures
    assert tp8["kv_tokens"] == 2_795_207 and tp8["kv_cache_bytes"] == 2 * round(53.31 * GIB)
    assert tp8["free_before_weights_bytes"] == round(137.34 * GIB)  # the last rank's line (TP0)
    summary = read(sample("sglang-summary.log")).figures
    assert (summary["kv_tokens"], summary["max_running_requests"], summary["max_model_len"]) == (2_261_377, 4096,
                                                                                                   128_000)
    assert summary["cuda_graph_bytes"] == round(1.44 * GIB) and summary["free_after_start_bytes"] == round(37.06 * GIB)
    weights = read(sample("sglang-weights.log")).figures
    assert weights["weights_bytes"] == round(56.98 * GIB) and weights["kv_tokens"] == 1_669_816


def test_sglang_compared_with_its_engine(llama_h100):
    comparison = compare(read(sample("sglang-summary.log")), llama_h100)
    from calculator.serving.sglang import SGLANG_CURRENT

    assert finding(comparison, "case")["engine_version"] == SGLANG_CURRENT
    assert {"kv_differs", "kv_implies_share", "kv_matches_defaults"} & set(codes(comparison))


# ---------------------------------------------------------------- nvidia-smi

def test_nvidia_smi_tables():
    p100 = read(sample("nvidia-smi-p100.txt")).figures
    assert p100["driver_version"] == "515.65.01" and p100["cuda_version"] == "11.7"
    assert p100["gpus"] == [{"index": 0, "name": "Tesla P100-PCIE...", "used_bytes": 0, "total_bytes": 16384 * MIB}]
    old = read(sample("nvidia-smi-gtx680.txt")).figures
    assert [(g["index"], g["used_bytes"], g["total_bytes"]) for g in old["gpus"]] == [(0, 9 * MIB, 4095 * MIB),
                                                                                    (1, 9 * MIB, 4095 * MIB)]


def test_nvidia_smi_processes():
    table = sample("nvidia-smi-p100.txt") + """
+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A     41267      C   /usr/bin/python3                10240MiB |
+-----------------------------------------------------------------------------+
"""
    assert read(table).figures["processes"] == [{"gpu": 0, "pid": 41267, "name": "/usr/bin/python3",
                                                 "used_bytes": 10240 * MIB}]


def test_query_csv_and_the_card_it_names():
    figures = read(sample("nvidia-smi-query.csv")).figures
    assert [g["total_bytes"] for g in figures["gpus"]] == [81559 * MIB] * 2
    assert figures["gpus"][0]["used_bytes"] == 77112 * MIB and figures["gpus"][1]["free_bytes"] == 81012 * MIB
    assert card_for_total(81559 * MIB).key == "h100"  # not the A100's 81,920 MiB, 0.4 % away
    comparison = compare(read(sample("nvidia-smi-query.csv")), Case(card=gpu("h100")))
    assert "smi_other_card" not in codes(comparison)
    assert [a.params.get("index") for a in comparison.advice] == [0]  # GPU 0 is busy, GPU 1 free


# ---------------------------------------------------------------- accelerate, memory_summary, OOM

def test_accelerate_table_against_the_count():
    """accelerate's docs print 413.18 "MB" for bert-base-cased in float32: 433,249,280 bytes
    (the base model, DESIGN.md) in MiB. The calculator's base-class count agrees; the
    masked-LM class it builds by default does not, and the reader says why."""
    evidence = read(sample("accelerate-bert.txt"))
    assert evidence.figures["model"] == "bert-base-cased"
    assert abs(evidence.figures["rows"][0]["total_bytes"] - 433_249_280) < 0.005 * MIB
    base = compare(evidence, Case(model=resolve("bert-base-cased", "base")))
    assert codes(base) == ["accelerate_matches", "accelerate_matches"]
    assert "accelerate_other_model" in codes(compare(evidence, Case(model=resolve("gpt2"))))


def test_accelerate_terabytes():
    rows = read(sample("accelerate-idefics.txt")).figures["rows"]
    assert [r["dtype"] for r in rows] == ["float32", "float16", "int8", "int4"]
    assert rows[0]["training_adam_bytes"] == round(1.16 * 2**40) and rows[2]["largest_layer_bytes"] == round(772.52 * MIB)


def test_memory_summaries():
    new = read(sample("memory-summary-kib.txt")).figures
    assert new["allocated_peak_bytes"] == MIB and new["cuda_ooms"] == 0 and new["device"] == 0
    old = read(sample("memory-summary-bytes.txt")).figures
    assert old["allocated_peak_bytes"] == 133_632 and old["reserved_peak_bytes"] == 2048 * 1024  # "KB" = KiB
    comparison = compare(read(sample("memory-summary-bytes.txt")), Case(card=gpu("h100")))
    assert finding(comparison, "summary_peaks")["gap_bytes"] == 2048 * 1024 - 133_632
    assert finding(comparison, "summary_on_card")["smi_bytes"] == 2048 * 1024 + gpu("h100").context_bytes


def test_oom_message_goes_to_its_reader():
    evidence = read(sample("oom-legacy.txt"))
    assert evidence.kind == "oom-message"
    assert evidence.figures["requested"] == round(5.74 * GIB) and evidence.figures["total"] == round(5.50 * GIB)
    # the reader's main verdict first (5.74 GiB asked of a 5.50 GiB card: too big), then the
    # cause that says which tensor it is (a request of at least a quarter of the card)
    assert [c["code"] for c in evidence.causes] == ["too_big", "huge_request"]
    _, advice = lines(evidence, compare(evidence, Case()), "fr")
    assert [line.split("**")[1] for line in advice[:2]] == ["Le travail ne tient pas.", "Un tenseur énorme."]


def test_figures_are_written_in_the_readers_units():
    rows = dict(figure_rows(read(sample("vllm-v0-profile.log")), "fr"))
    assert rows["Poids chargés (par GPU)"] == "14,99 Gio"
    assert rows["Taille du cache KV (tokens)"] == "31\u202f232"


# ---------------------------------------------------------------- refusals and bounds

@pytest.mark.parametrize("text, code", [
    ("", "evidence_empty"), ("   \n", "evidence_empty"),
    ("hello, my model is slow", "evidence_unrecognised"),
    ("INFO Maximum concurrency for", "evidence_incomplete"),  # a vLLM log cut before the figures
    ("| GPU reserved memory | Allocated memory |", "evidence_incomplete"),
    ("torch.OutOfMemoryError: CUDA out of memory.", "evidence_oom_no_figures"),
    (12, "evidence_not_text"),
])
def test_bad_input_is_refused_in_both_languages(text, code):
    with pytest.raises(CalculatorError) as caught:
        read(text)
    assert caught.value.code == code
    assert caught.value.message("en") != caught.value.message("fr") != f"error.{code}"


def test_kind_forced_and_unknown():
    with pytest.raises(CalculatorError) as caught:
        read(sample("nvidia-smi-p100.txt"), "vllm-log")
    assert caught.value.code == "evidence_incomplete"
    with pytest.raises(CalculatorError) as caught:
        read("x", "tgi-log")
    assert caught.value.code == "evidence_unknown_kind" and set(KINDS) <= set(caught.value.params["choices"].split(", "))


def test_size_and_bytes_are_bounded():
    with pytest.raises(CalculatorError) as caught:
        decode(b"a" * (MAX_BYTES + 1))
    assert caught.value.code == "evidence_too_long"
    with pytest.raises(CalculatorError) as caught:
        decode(b"GPU KV cache size: \x00\x01")
    assert caught.value.code == "evidence_not_text"


@pytest.mark.parametrize("hostile", [
    "GPU KV cache size: " + "1," * 150_000,
    ("| " + "0 " * 400 + "|" + " " * 400 + "MiB /\n") * 500,
    "KV Cache is allocated. #tokens: " + "9" * 200_000,
    ("Load weight end. " + "mem usage=" * 30 + "\n") * 2000,
    "|" + " 1" * 200_000 + " MiB",
    "Memory Usage for loading `" + "`" * 200_000,
])
def test_hostile_input_takes_little_time(hostile):
    start = time.process_time()
    try:
        read(hostile[: MAX_BYTES - 1])
    except CalculatorError:
        pass
    assert time.process_time() - start < 2.0


# ---------------------------------------------------------------- CLI

def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`python -m calculator read ...`, run in this process (tests/cli_runner.py)."""
    return cli_runner.run_cli("read", *args, stdin=stdin)


def test_cli_reads_a_file_and_stdin_as_json():
    import json

    done = run_cli(str(DATA / "vllm-v1-tokens.log"), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["kind"] == "vllm-log" and data["figures"]["kv_tokens"] == 2_042_016
    assert data["comparison"]["findings"][0]["code"] == "no_case"
    piped = run_cli("--json", "--model", "llama-3.1-8b", "--gpu", "h100",
                    stdin=(DATA / "vllm-v1-available.log").read_bytes())
    assert json.loads(piped.stdout)["comparison"]["findings"][0]["code"] == "case"


@pytest.mark.parametrize("args, stdin", [
    ((), b""), ((), b"not a log at all"), ((), b"\x00\x01\x02"), (("/nonexistent/log.txt",), b""),
    (("--kind", "tgi"), b"x"), ((), b"x" * (MAX_BYTES + 10)),
])
def test_cli_refuses_in_one_line(args, stdin):
    done = run_cli(*args, stdin=stdin)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


RTX_4090_TABLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |
|  0%   45C    P8             25W /  450W |    1234MiB /  24564MiB |      2%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""


def test_nvidia_smi_names_the_card_it_prints_before_its_total():
    """An RTX 4090 and an RTX A5000 both report 24,564 MiB: the printed name decides."""
    from calculator.core.gpus import gpu

    evidence = read(RTX_4090_TABLE)
    assert evidence.kind == "nvidia-smi" and evidence.figures["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"
    comparison = compare(evidence, Case(card=gpu("rtx4090")))
    assert finding(comparison, "smi_gpu")["card"] == "NVIDIA GeForce RTX 4090"
    assert "smi_other_card" not in codes(comparison)
    other = compare(evidence, Case(card=gpu("h100")))
    assert "smi_other_card" in codes(other)
    cut = read(RTX_4090_TABLE.replace("NVIDIA GeForce RTX 4090    ", "NVIDIA GeForce RTX 40...")).figures["gpus"][0]
    assert card_for_total(cut["total_bytes"]) is not None  # a cut name: the total still reads a card


def test_memory_held_by_a_listed_process_is_not_called_someone_elses():
    """The process nvidia-smi lists is, most of the time, the reader's own job: the advice says
    so instead of telling them to stop it."""
    from calculator.core.gpus import gpu

    table = RTX_4090_TABLE.replace("1234MiB", "15565MiB") + """\
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|=========================================================================================|
|    0   N/A  N/A      4242      C   python                                     15550MiB |
+-----------------------------------------------------------------------------------------+
"""
    comparison = compare(read(table), Case(card=gpu("rtx4090")))
    held = [a for a in comparison.advice if a.code == "do_gpu_held_by"]
    assert held and held[0].params["pids"] == "4242" and "do_free_gpu" not in {a.code for a in comparison.advice}
    for lang in ("en", "fr"):
        from calculator.core.messages import text

        assert "4242" in text("evidence.do_gpu_held_by", lang, index=0, used_bytes="15.20 GiB", pids="4242")


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_read_answers_in_the_readers_language_and_as_an_answer_to_paste(lang, tmp_path):
    log = b"GPU KV cache size: 443,328 tokens\n"
    case = ("--model", "llama-3.1-8b", "--gpu", "h100")
    plain_text = run_cli(*case, "--lang", lang, stdin=log)
    assert plain_text.returncode == 0, plain_text.stderr
    english = ("Read as", "What to do", "figure", "Units:")
    assert all(word in plain_text.stdout for word in english) == (lang == "en")
    assert ("Lu comme" in plain_text.stdout) == (lang == "fr")
    answer = run_cli(*case, "--markdown", "--lang", lang, stdin=log)
    assert answer.returncode == 0, answer.stderr
    link = re.search(r"(http://\S+engine-settings)", answer.stdout).group(1)
    assert f"lang={lang}" in link and "model=llama-3.1-8b" in link and "gpu=h100" in link
    assert "](serving#" not in answer.stdout  # the guide's links are whole addresses
    command = re.findall(r"```bash\n(.*?)\n```", answer.stdout, re.S)[-1]
    assert command == "python -m calculator read pasted.txt --model llama-3.1-8b --gpu h100"
    (tmp_path / "pasted.txt").write_bytes(log)  # the reader saves what they pasted, and reads it again
    again = run_cli(str(tmp_path / "pasted.txt"), *shlex.split(command)[5:], "--markdown", "--lang", lang)
    strip = lambda text: re.sub(r"```bash\n.*?\n```", "", text, flags=re.S)  # noqa: E731
    assert strip(again.stdout) == strip(answer.stdout)
