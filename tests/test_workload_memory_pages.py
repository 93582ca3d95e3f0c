"""The memory chapters' pages in the case's workload, in both languages: oom and
quantization for a speech, a seq2seq, a forward and a vision model, with the figures the
CLI prints for the same run. A few AppTest runs; the engine is pinned by hand in
tests/test_workload_chapters.py."""

from __future__ import annotations

import json

from calculator.core.messages import text as text_of
from guide.format import format_bytes, format_count
from tests.apptest import chart_specs, fingerprint, open_page
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints


def cli_json(*args: str) -> dict:
    out = cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def seen(at) -> str:
    """The page's results, with French typography's narrow spaces read as plain ones."""
    assert not at.exception and not at.error, [e.value for e in at.error]
    return fingerprint(at).replace("\u202f", " ").replace("\u00a0", " ")


def plain(text: str) -> str:
    return text.replace("\u202f", " ").replace("\u00a0", " ")


def test_whisper_on_the_oom_page_in_french():
    text = seen(open_page("oom", "fr", model="whisper-small", gpu="t4", batch="4", new_tokens="128"))
    data = cli_json("inference", "whisper-small", "--batch", "4", "--new-tokens", "128", "--gpu", "t4")
    assert "L’encodeur en lit les 1 500 trames, le décodeur écrit 128 tokens après ses 4 tokens de tâche" in text
    assert f"Au batch 4, le pic atteint {plain(format_bytes(data['total_bytes'], 'fr'))} (ça tient)" in text
    assert f"{plain(format_count(data['largest_batch'], 'fr'))} sur le NVIDIA T4" in text
    assert "trier par longueur ne change rien" in text


def test_t5_on_the_oom_page_reads_the_encoders_input():
    at = open_page("oom", "en", model="t5-base", gpu="t4", batch="1024", prompt="100", new_tokens="100")
    text = seen(at)
    data = cli_json("inference", "t5-base", "--workload", "seq2seq", "--batch", "1024", "--prompt", "100",
                    "--new-tokens", "100", "--gpu", "t4")
    assert "the encoder reads 100 input tokens, then the decoder writes 100 tokens from its start token" in text
    assert f"the longest context that fits on the NVIDIA T4 is **{data['largest_context']:,} tokens**" in text
    assert any("Encoder input (tokens per sequence)" in json.dumps(spec) for spec in chart_specs(at))


def test_bert_and_vit_on_the_oom_page():
    text = seen(open_page("oom", "en", model="bert-base-cased", gpu="t4", prompt="128"))
    data = cli_json("inference", "bert-base-cased", "--workload", "forward", "--batch", "4", "--context", "128",
                    "--gpu", "t4")
    assert "Forward pass: each item is one sequence of 128 tokens" in text
    assert data["largest_context"] == 512  # BERT's 512 positions fit at batch 4 on a T4
    assert "the model's whole context window (512 tokens) fits on the NVIDIA T4" in text
    text = seen(open_page("oom", "fr", model="vit-base-patch16-224", gpu="t4"))
    data = cli_json("inference", "vit-base-patch16-224", "--workload", "vision", "--batch", "4", "--gpu", "t4")
    assert "chaque élément est une image de 197 patchs" in text
    assert f"{plain(format_count(data['largest_batch'], 'fr'))} sur le NVIDIA T4" in text


def peak_column(at, lang: str) -> dict[str, str]:
    """The formats table's peak column, by format."""
    fmt, peak = text_of("quantization.col_format", lang), text_of("quantization.col_peak", lang)
    table = next(d.value for d in at.dataframe if peak in d.value.columns)
    return {name: plain(value) for name, value in zip(table[fmt], table[peak])}


def test_the_quantization_page_prices_whisper_and_t5_as_the_cli():
    at = open_page("quantization", "en", model="whisper-small", gpu="t4", batch="8", new_tokens="128")
    text = seen(at)
    data = cli_json("quantize", "whisper-small", "--gpu", "t4", "--batch", "8", "--new-tokens", "128")
    assert {row["format"]: format_bytes(row["peak_bytes"], "en") for row in data["rows"]} == peak_column(at, "en")
    assert "the peak of a batch of 8 items of the workload above" in text
    at = open_page("quantization", "fr", model="t5-base", gpu="t4", batch="8", prompt="400", new_tokens="100")
    text = seen(at)
    data = cli_json("quantize", "t5-base", "--gpu", "t4", "--batch", "8", "--prompt", "400", "--new-tokens", "100")
    assert "l’encodeur lit 400 tokens d’entrée, puis le décodeur écrit 100 tokens" in text
    assert peak_column(at, "fr") == {r["format"]: plain(format_bytes(r["peak_bytes"], "fr")) for r in data["rows"]}


def test_the_serving_page_tells_whisper_where_its_figures_are():
    at = open_page("serving", "fr", model="whisper-small", gpu="h100")
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert any("API de transcription (/v1/audio/transcriptions)" in e for e in errors)
    assert not any("ne génère pas" in e for e in errors)


def test_a_bert_classifier_trains_over_the_case_sequence_on_the_page():
    at = open_page("fine-tuning", "en", model="bert-base-cased", gpu="t4", method="full", checkpointing="none",
                   sequence="128", batch="8")
    text = seen(at)
    data = cli_json("train", "bert-base-cased", "--method", "full", "--precision", "bf16-autocast",
                    "--checkpointing", "none", "--sequence", "128", "--batch", "8", "--gpu", "t4")
    assert format_bytes(data["total_bytes"], "en") in text
