"""The dummy-data script: valid Python for every catalog model, and, with the model name
swapped for a tiny local model, it runs on the CPU."""

from __future__ import annotations

import contextlib
import io
import runpy
import subprocess
import sys

import pytest
import torch
import transformers

from calculator.models import catalog
from calculator.memory.inference import can_generate, inference_memory
from calculator.models.meta import make_config
from calculator.memory.snippets import SNIPPET_DTYPES, dummy_data_snippet
from tests.conftest import load_test_config


def snippet_for(key: str, mode: str, lang: str = "en", dtype: str = "bfloat16", batch: int = 2, context: int = 48) -> str:
    entry = next(e for e in catalog.entries() if e.key == key)
    summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
    if mode == "generate" and not can_generate(spec):
        mode = "forward"  # an encoder's dummy run is one forward
    memory = inference_memory(summary, spec, batch, context, dtype, mode=mode)
    return dummy_data_snippet(entry.id, summary.architecture, spec.kind, batch, context, dtype,
                              memory.attention_used, mode, memory.total_bytes, lang)


TOKEN_MODELS = [e.key for e in catalog.entries() if catalog.stored_spec(e.key).kind != "vision"]


@pytest.mark.parametrize("key", TOKEN_MODELS)
def test_valid_python_for_every_catalog_model(key):
    for mode in ("generate", "loglikelihood"):
        for lang in ("en", "fr"):
            code = snippet_for(key, mode, lang)
            compile(code, f"<{key}>", "exec")
            assert "max_memory_allocated" in code


def test_gemma_2_is_loaded_with_the_attention_it_supports():
    code = snippet_for("gemma-2-9b", "generate")
    assert "attn_implementation='eager'" in code


def test_values_enter_the_code_as_literals_only():
    code = dummy_data_snippet("evil'); import os; os.system('x", "LlamaForCausalLM", "decoder", 1, 8, "bfloat16",
                              "sdpa", "generate", 10)
    tree = compile(code, "<x>", "exec", flags=0x400)  # ast.PyCF_ONLY_AST
    imports = [node for node in __import__("ast").walk(tree) if isinstance(node, __import__("ast").Import)]
    assert [alias.name for node in imports for alias in node.names] == ["torch"]
    with pytest.raises(ValueError):
        dummy_data_snippet("m", "Llama; import os", "decoder", 1, 8, "bfloat16", "sdpa", "generate", 10)
    with pytest.raises(ValueError):
        dummy_data_snippet("m", "LlamaForCausalLM", "decoder", 1, 8, "int4", "sdpa", "generate", 10)


TINY = {
    "llama-3-8b": lambda: load_test_config("tiny-llama"),
    "t5-small": lambda: {**catalog.config("t5-small"), "d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4,
                         "d_kv": 16, "vocab_size": 300},
    "bert-base-cased": lambda: {**catalog.config("bert-base-cased"), "hidden_size": 64, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300},
}


@pytest.mark.parametrize("key", list(TINY))
@pytest.mark.parametrize("mode", ["generate", "loglikelihood"])
def test_runs_on_the_cpu_with_a_tiny_local_model(key, mode, tmp_path):
    config = TINY[key]()
    model = getattr(transformers, config["architectures"][0])._from_config(make_config(config), dtype=torch.float32)
    model.save_pretrained(tmp_path / "model")
    entry = next(e for e in catalog.entries() if e.key == key)
    code = snippet_for(key, mode, lang="fr", dtype="float32")
    assert repr(entry.id) in code
    script = tmp_path / "run.py"
    script.write_text(code.replace(repr(entry.id), repr(str(tmp_path / "model"))))
    if (key, mode) == ("llama-3-8b", "generate"):  # once as a reader runs it: a fresh interpreter
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                             env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        assert run.returncode == 0, run.stderr[-2000:]
        printed = run.stdout
    else:  # the others as a script in this process (torch is imported already: ~4 s less each)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
        printed = out.getvalue()
    assert "CPU" in printed


def test_snippet_dtypes_are_what_from_pretrained_takes():
    assert all(hasattr(torch, d) for d in SNIPPET_DTYPES)
