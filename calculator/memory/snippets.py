"""Ready-to-run Python for the user's own model: the worst case first, with dummy tokens.

The code is built from values the calculator chose or checked (catalog ids, transformers
class names, numbers), and every string goes in through repr(), so nothing a user typed can
change what the snippet does. It runs the same forward the calculator models (bench/measure.py's
procedures): the prefill of model.generate, or a forward and float32 log-probabilities.
Comments and messages are in the reader's language (content/ui/*/snippet.toml).
"""

from __future__ import annotations

import re

from calculator.core.messages import text
from calculator.core.units import format_bytes

SNIPPET_DTYPES = ("float32", "float16", "bfloat16")
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,80}$")


def dummy_data_snippet(model_id: str, architecture: str, kind: str, batch: int, context: int, dtype: str,
                       attention: str, mode: str, predicted_bytes: int, lang: str = "en") -> str:
    """A script that loads the model, runs one forward at `batch` x `context` dummy tokens,
    and prints torch.cuda.max_memory_allocated() beside the calculator's prediction."""
    if dtype not in SNIPPET_DTYPES:
        raise ValueError(f"no snippet for {dtype}")
    if not _CLASS_NAME.match(architecture):
        raise ValueError("architecture must be a class name")
    say = lambda key, **params: text(f"snippet.{key}", lang, **params)  # noqa: E731
    predicted = format_bytes(predicted_bytes, lang)
    if kind == "encoder":
        run = [f"    # {say('forward')}", "    out = model(input_ids=ids, attention_mask=mask)"]
    elif mode == "generate":
        run = [f"    # {say('prefill')}",
               "    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=1,",
               "                   do_sample=False, pad_token_id=0)"]
    else:
        decoder = ", decoder_input_ids=ids" if kind == "encoder-decoder" else ""
        run = [f"    out = model(input_ids=ids, attention_mask=mask{decoder})",
               f"    # {say('scores')}",
               "    logprobs = torch.log_softmax(out.logits.float(), dim=-1)"]
    measured = "f" + repr(say("measured", predicted=predicted))
    lines = [
        f"# {say('title')}",
        f"# {model_id}, batch {int(batch)} x {int(context)} tokens, {dtype}, {attention}, {mode}.",
        f"# {say('predicted', predicted=predicted)}",
        f"# {say('nvidia_smi')}",
        "import torch",
        f"from transformers import {architecture}",
        "",
        f"MODEL = {model_id!r}",
        f"BATCH, CONTEXT = {int(batch)}, {int(context)}",
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        "",
        f"model = {architecture}.from_pretrained(",
        f"    MODEL, dtype=torch.{dtype}, attn_implementation={attention!r}, device_map=device",
        ").eval()",
        "ids = torch.randint(0, model.config.vocab_size, (BATCH, CONTEXT), device=device)",
        "mask = torch.ones_like(ids)",
        "",
        'if device == "cuda":',
        "    torch.cuda.reset_peak_memory_stats()",
        "with torch.inference_mode():",
        *run,
        'if device == "cuda":',
        "    peak = torch.cuda.max_memory_allocated() / 2**30",
        f"    print({measured})",
        "else:",
        f"    print({say('on_cpu')!r})",
    ]
    return "\n".join(lines) + "\n"
