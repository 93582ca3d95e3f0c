"""Inputs of the inference-memory widgets (oom chapter). Their options are the calculator's
own technical names (sdpa, eager, generate, loglikelihood), the same in both languages, so
the URL means the same thing whatever the reader's language."""

from __future__ import annotations

import streamlit as st

from calculator.memory.inference import ATTENTION, MODES, can_generate
from guide.widgets import Context

KV_DTYPES = ("auto", "float16", "bfloat16", "float8", "int8")


def attention_picker(ctx: Context, key: str, container=st) -> str:
    return container.selectbox(ctx.t("oom.attention"), list(ATTENTION), key=key, bind="query-params",
                               help=ctx.t("oom.attention_help"))


def mode_picker(ctx: Context, key: str, spec=None, container=st) -> str:
    """generate first for a model that generates; a model that does not (an encoder, a
    classifier) runs forward, and its picker offers only what it can run."""
    from guide.inputs.common import url_choice

    options = list(MODES) if spec is None or can_generate(spec) else ["forward", "loglikelihood"]
    return url_choice(ctx, ctx.t("oom.mode"), key, options, lambda mode: ctx.t(f"oom.mode_{mode}"),
                      container=container, help=ctx.t("oom.mode_help"))


def kv_dtype_picker(ctx: Context, key: str, container=st) -> str | None:
    from guide.inputs.common import url_choice

    choice = url_choice(ctx, ctx.t("oom.kv_dtype"), key, KV_DTYPES,
                        lambda v: ctx.t("oom.kv_auto") if v == "auto" else v, container=container,
                        help=ctx.t("oom.kv_dtype_help"))
    return None if choice == "auto" else choice


def moment(ctx: Context, name: str) -> str:
    """Where in the forward the peak comes, in words."""
    return ctx.t(f"oom.moment_{name}")


def inference_answer(model, card, batch: int, context: int, options: dict):
    """The inference command's answer for `batch` sequences of `context` tokens (the core of
    `inference --json`, calculator/answers/inference_json.py): the out-of-memory chapter's
    calculators answer with the run at the edge they found (longest context, largest batch)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.inference_json import inference_json
    from calculator.memory.workloads import default_workload

    typed = model.key or model.name
    argv = [typed, "--batch", str(batch), "--context", str(context), "--dtype", options["dtype"],
            "--attention", options.get("attention", "sdpa"), "--mode", options["mode"], "--gpu", card.key]
    argv += ["--kv-dtype", options["kv_dtype"]] if options.get("kv_dtype") else []
    data = inference_json(model, card, batch, {"context": context}, options, default_workload(model.spec))
    return answer_for("inference", data, tuple(argv), typed)
