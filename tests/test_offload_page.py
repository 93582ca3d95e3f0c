"""The cpu-offloading page and the CLI give the same numbers for the same case, and the French
page shows its offloading calculators, and the code they generate, in French."""

from __future__ import annotations

import json

import pytest

from calculator.core.messages import text
from calculator.core.units import format_bytes
from tests.apptest import open_page, texts
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_cpu_memory_needed_equals_the_cli(lang):
    """The chapter's case (Llama 3.1 8B on a T4, bfloat16), no budget typed: the GPU budget is
    what the T4 gives a process less the headroom, and the CPU takes the rest."""
    at = open_page("cpu-offloading", lang)
    assert not at.exception, [e.value for e in at.exception]
    data = json.loads(cli("offload", "llama-3.1-8b", "--gpu", "t4", "--json").stdout)
    shown = metrics(at)
    assert shown[text("offload.cpu_needed", lang)] == format_bytes(data["cpu_needed_bytes"], lang)
    assert shown[text("offload.on_gpus", lang)] == format_bytes(data["gpu_bytes"], lang)
    code = next(c.value for c in at.code if "from_pretrained" in c.value)
    assert (code.strip() == data["snippet"].strip()) == (lang == "en")  # the comments are in the reader's language
    # the case's bfloat16 is loaded in float16 on the T4, as the command and the other chapters do
    assert "dtype=torch.float16" in code and text("data_parallel.float16_note", lang, gpu="NVIDIA T4") in texts(at)


def test_quantized_plan_equals_the_cli():
    at = open_page("cpu-offloading", "en", om_quant="bnb-nf4", om_gpu_gib="3")
    data = json.loads(cli("offload", "llama-3.1-8b", "--gpu", "t4", "--gpu-memory", "3GiB", "--quantization",
                          "bnb-nf4", "--json").stdout)
    shown = metrics(at)
    assert data["cpu_bytes"] > 0
    assert shown["CPU memory needed"] == format_bytes(data["cpu_bytes"], "en")
    assert shown["On the GPUs"] == format_bytes(data["gpu_bytes"], "en")
    assert data["snippet"].strip() in [c.value.strip() for c in at.code]


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_llama_cpp_widget_equals_the_cli(lang):
    at = open_page("cpu-offloading", lang, lc_context="131072")
    data = json.loads(cli("llama-cpp", "llama-3.1-8b", "--gpu", "t4", "--type", "Q4_K", "--context", "131072",
                          "--json").stdout)
    shown = metrics(at)
    # 22 of 33 slots with the T4's calibrated context (tests/test_llama_cpp.py counts it by hand)
    assert shown[text("llama_cpp.ngl", lang)] == f"{data['ngl']} / {data['layers'] + 1}" == "22 / 33"
    assert shown[text("llama_cpp.on_gpu", lang)] == format_bytes(data["gpu_bytes"], lang)
    assert shown[text("llama_cpp.on_cpu", lang)] == format_bytes(data["cpu_bytes"], lang)
    assert data["command"] in [c.value.strip() for c in at.code]


ENGLISH = ("where each module went", "what transformers may place", "the layers that fit nowhere else",
           "Quantized layers on the GPU", "The placement shown above", "CPU memory needed", "On the GPUs",
           "Slower per token", "Quantization on the GPU", "In CPU RAM", "tokens/s at best", "Ready to paste",
           "KV cache type", "Compute buffer", "Weights placed", "Every layer fits", "None (weights as loaded)")


def test_french_page_shows_no_english_in_the_offloading_calculators():
    at = open_page("cpu-offloading", "fr", om_quant="bnb-int8", om_gpu_gib="4", om_cpu_gib="2",
                   lc_model="meta-llama/Llama-3.1-70B")
    assert not at.exception
    seen = texts(at) + "\n".join(f"{m.label} {m.help or ''}" for m in at.metric)
    seen += "\n".join(f"{w.label} {w.help or ''}" for w in list(at.selectbox) + list(at.number_input))
    seen += "\n".join(str(d.value.columns.tolist()) for d in at.dataframe)
    found = [phrase for phrase in ENGLISH if phrase in seen]
    assert found == []
    code = next(c.value for c in at.code if "BitsAndBytesConfig" in c.value)
    assert "# où chaque module a été placé" in code and "non quantifi" in code and "offload_folder" in code
