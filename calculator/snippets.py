"""Ready-to-run Python for the user's own model: the worst case first, with dummy tokens.

The code is built from values the calculator chose or checked (catalog ids, transformers
class names, numbers), and every string goes in through repr(), so nothing a user typed can
change what the snippet does. It runs the same forward the calculator models (measure.py's
procedures): the prefill of model.generate, or a forward and float32 log-probabilities.
"""

from __future__ import annotations

import re

from .units import format_bytes

SNIPPET_DTYPES = ("float32", "float16", "bfloat16")
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,80}$")


def dummy_data_snippet(model_id: str, architecture: str, kind: str, batch: int, context: int, dtype: str,
                       attention: str, mode: str, predicted_bytes: int) -> str:
    """A script that loads the model, runs one forward at `batch` x `context` dummy tokens,
    and prints torch.cuda.max_memory_allocated() beside the calculator's prediction."""
    if dtype not in SNIPPET_DTYPES:
        raise ValueError(f"no snippet for {dtype}")
    if not _CLASS_NAME.match(architecture):
        raise ValueError("architecture must be a class name")
    predicted = format_bytes(predicted_bytes)
    seq2seq = kind == "encoder-decoder"
    if kind == "encoder":
        run = ["    out = model(input_ids=ids, attention_mask=mask)  # one forward over every position"]
    elif mode == "generate":
        run = ["    # the prefill of a generation: the whole prompt at once; its last position's logits",
               "    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=1, do_sample=False, pad_token_id=0)"]
    else:
        decoder = ", decoder_input_ids=ids" if seq2seq else ""
        run = [f"    out = model(input_ids=ids, attention_mask=mask{decoder})",
               "    # every position's log-probabilities in float32, as an evaluation computes them",
               "    logprobs = torch.log_softmax(out.logits.float(), dim=-1)"]
    lines = [
        "# Worst case first: one forward at the longest context, with dummy tokens.",
        f"# {model_id}: batch {batch} x {context} tokens, {dtype}, {attention} attention, {mode}.",
        f"# The calculator predicts a peak of {predicted} as torch.cuda.max_memory_allocated() counts it;",
        "# nvidia-smi shows more: the CUDA context and the memory PyTorch keeps reserved.",
        "import torch",
        f"from transformers import {architecture}",
        "",
        f"MODEL = {model_id!r}",
        f"BATCH, CONTEXT = {int(batch)}, {int(context)}",
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        "",
        f"model = {architecture}.from_pretrained(MODEL, dtype=torch.{dtype}, attn_implementation={attention!r},",
        "    device_map=device).eval()",
        "ids = torch.randint(0, model.config.vocab_size, (BATCH, CONTEXT), device=device)",
        "mask = torch.ones_like(ids)",
        "",
        'if device == "cuda":',
        "    torch.cuda.reset_peak_memory_stats()",
        "with torch.inference_mode():",
        *run,
        'if device == "cuda":',
        f'    print(f"peak allocated: {{torch.cuda.max_memory_allocated() / 2**30:.2f}} GiB (predicted: {predicted})")',
        "else:",
        '    print("It ran, on the CPU: run it on the GPU to measure the peak.")',
    ]
    return "\n".join(lines) + "\n"
