"""An out-of-memory message read against a case: the allocated figure split into the case's
weights, KV cache and the rest, the request named as one of the case's tensors; and the
`oom-message` command that prints it all (stdin, --json, exit 2 on what it cannot read)."""

from __future__ import annotations

import io
import json
import subprocess

import pytest

from calculator.models import catalog
from calculator.cli.commands.oom_message import read_stdin
from calculator.memory.oom_case import case_lines, case_tensors, read_against_case
from calculator.memory.oom_message import parse
from tests.cli_runner import run_cli
from tests.test_oom_message import RTX_4090, TORCH_1_13, TORCH_2_4

GIB, MIB = 2**30, 2**20
LLAMA_8B_PARAMETERS = 8_030_261_248  # Llama-3.1-8B's model card, lm_head untied
# Llama-3.1-8B's config.json: 32 layers, 8 KV heads of 128, vocabulary 128,256, hidden 4,096, 32 heads
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # keys and values, every layer, bfloat16: 128 KiB
# bfloat16 parameters, plus the rotary buffers inv_freq and original_inv_freq (64 float32 each)
LLAMA_8B_WEIGHTS = 2 * LLAMA_8B_PARAMETERS + 2 * 64 * 4


def llama(message: str, batch: int, tokens: int, dtype: str = "bfloat16"):
    summary, spec = catalog.stored_summary("llama-3.1-8b"), catalog.stored_spec("llama-3.1-8b")
    return read_against_case(parse(message), summary, spec, batch, tokens, dtype)


def message_asking(size: str, allocated: str = "20.91 GiB") -> str:
    return RTX_4090.replace("allocate 2.00 GiB", f"allocate {size}").replace("20.91 GiB is", f"{allocated} is")


def test_allocated_is_split_into_weights_cache_and_the_rest():
    reading = llama(RTX_4090, batch=4, tokens=1024)
    assert reading.weights_bytes == LLAMA_8B_WEIGHTS
    assert reading.kv_cache_bytes == 4 * 1024 * KV_BYTES_PER_TOKEN == 512 * MIB
    assert reading.rest_bytes == round(20.91 * GIB) - LLAMA_8B_WEIGHTS - 512 * MIB  # 5.45 GiB


def test_float32_logits_are_named():
    # batch 4 x 1,024 tokens x 128,256 x 4 bytes = 2,101,346,304 bytes, which PyTorch prints as 1.96 GiB
    reading = llama(message_asking("1.96 GiB"), batch=4, tokens=1024)
    assert 4 * 1024 * 128_256 * 4 == 2_101_346_304
    assert reading.matches[0].code == "logits_float32" and reading.matches[0].shape == (4, 1024, 128_256)
    assert "4 × 1,024 × 128,256 in float32" in case_lines(reading)[1]


def test_eager_attention_scores_are_named():
    # batch 1 x 32 heads x 4,096 x 4,096 in float32 = 2 GiB; in bfloat16 1 GiB
    assert llama(message_asking("2.00 GiB"), 1, 4096).matches[0].code == "attention_scores_float32"
    assert llama(message_asking("1.00 GiB"), 1, 4096).matches[0].code == "attention_scores"


def test_a_request_no_tensor_explains_gets_the_nearest():
    reading = llama(message_asking("3.33 GiB"), 1, 1024)
    assert reading.matches == () and reading.nearest is not None
    assert "None of this case's large tensors" in case_lines(reading)[1]


def test_a_message_smaller_than_the_case_says_so():
    reading = llama(TORCH_2_4, batch=4, tokens=4608)  # 11.97 GiB allocated, 14.96 GiB of weights
    assert reading.rest_bytes < 0
    assert "more than the 11.97 GiB" in case_lines(reading)[0]
    assert "dépassent les 11,97" in case_lines(reading, "fr")[0].replace("\u202f", " ")


def test_tensors_of_a_quantized_case_compute_in_16_bits():
    spec = catalog.stored_spec("llama-3.1-8b")
    by_code = {t.code: t for t in case_tensors(spec, 2, 512, "bnb-nf4")}
    assert by_code["logits"].bytes == 2 * 512 * 128_256 * 2 and by_code["logits"].dtype == "bfloat16"


def cli(*args: str, stdin: str) -> subprocess.CompletedProcess:
    return run_cli("oom-message", *args, stdin=stdin)  # in this process (tests/cli_runner.py)


def test_cli_json_has_causes_figures_and_the_case():
    done = cli("--json", "--model", "llama-3.1-8b", "--batch", "4", "--tokens", "1024", stdin=message_asking("1.96 GiB"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["causes"] == ["fragmentation"]  # 1.12 GiB free + 1.05 GiB unallocated >= 1.96 GiB
    assert data["figures"]["requested_bytes"] == round(1.96 * GIB)
    assert data["figures"]["this_process_outside_pytorch_bytes"] == (
        round(22.52 * GIB) - round(20.91 * GIB) - round(1.05 * GIB))
    assert data["case"]["matches"][0]["tensor"] == "logits_float32"
    assert data["case"]["weights_bytes"] == LLAMA_8B_WEIGHTS


def test_cli_table_and_too_big():
    done = cli(stdin=TORCH_2_4)
    assert done.returncode == 0, done.stderr
    assert "Causes: too_big, other_process" in done.stdout and "15.75 GiB" in done.stdout  # 11.97 + 3.78 GiB


def test_cli_reads_the_older_wording():
    data = json.loads(cli("--json", stdin=TORCH_1_13).stdout)
    assert data["figures"]["wording"] == "reserved" and data["causes"][0] == "fragmentation"


@pytest.mark.parametrize("stdin, words", [("hello", "not a PyTorch out-of-memory message"),
                                          ("RuntimeError: CUDA error: out of memory", "gives no figures"),
                                          ("", "not a PyTorch out-of-memory message")])
def test_cli_refuses_what_it_cannot_read_in_one_line(stdin, words):
    done = cli(stdin=stdin)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1 and not done.stdout


def test_cli_refuses_a_bad_case_in_one_line():
    done = cli("--model", "llama-3.1-8b", "--batch", "0", stdin=TORCH_2_4)
    assert done.returncode == 2 and "batch" in done.stderr and "Traceback" not in done.stderr


def test_stdin_is_read_within_a_bound():
    stream = io.BytesIO(b"x" * 5_000_000 + RTX_4090.encode())
    kept = read_stdin(stream, limit=100_000)
    assert len(kept) == 100_000 and kept.endswith("unallocated.")


def test_cli_speaks_the_readers_language():
    english, french = cli(stdin=TORCH_2_4), cli("--lang", "fr", stdin=TORCH_2_4)
    assert english.returncode == french.returncode == 0, french.stderr
    assert "Causes: too_big, other_process" in english.stdout and "Asked for, and refused" in english.stdout
    said = french.stdout.replace("\u202f", " ").replace("\u00a0", " ")  # the guide's typography, when registered
    assert "Causes : too_big, other_process" in said and "Gio" in said
    for word in ("Asked for", "Units:", "The work does not fit", "What"):
        assert word not in french.stdout, word
