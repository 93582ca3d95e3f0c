"""serving#how-many-gpus: U users x L tokens -> for each tensor-parallel size that divides the
heads, the sequences one copy of the model holds, the copies needed and the GPUs in all; the
fewest, and the command that starts it."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.serving.launch import sglang_command, vllm_command
from calculator.serving.engines import MAX_TOKENS, MAX_USERS
from calculator.serving.plan import serve
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs
from calculator.serving.weights import SERVED_FORMATS
from guide.inputs.serving import (WEIGHT_CHOICES, asked_dtype, case_count, dtype_args, engine_picker, kv_picker,
                                  serving_case, engine_note)


def paste_answer(model, plan, users: int, tensor: int):
    """The serve command's answer for these users (its JSON is the plan's, as `serve --json`
    writes it): the pool of one layout and, when it is short, the fewest GPUs."""
    from calculator.answers.markdown import answer_for as answer_of

    typed = model.key or model.name
    argv = (typed, "--gpu", plan.gpu, *dtype_args(plan), "--kv-dtype", plan.kv_dtype, "--context", str(plan.context),
            "--users", str(users), "--tensor", str(tensor), "--engine", plan.engine)
    from calculator.answers.serving_json import serve_json

    data = serve_json(model, plan)
    return answer_of("serve", data, argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "svg_model", "gpu": "svg_gpu", "dtype": "svg_dtype"}, dtypes=WEIGHT_CHOICES)
    model, gpu, dtype = inputs.model, inputs.card, asked_dtype(ctx, inputs)
    c4, c5, c6, c7 = st.columns(4)
    kv_dtype = kv_picker(ctx, "svg_kv", container=c4)
    case_users, case_context, tensor = serving_case(ctx)
    users = case_count(ctx, "serving.users", "svg_users", case_users, high=MAX_USERS, container=c5,
                       help_key="serving.users_help")
    context = case_count(ctx, "serving.context", "svg_context", case_context, high=MAX_TOKENS, step=128,
                         container=c6)
    engine = engine_picker(ctx, "svg_engine", container=c7)
    try:
        plan = serve(model, gpu, engine=engine, dtype=dtype, kv_dtype=kv_dtype, context=context, users=users,
                     tensor=tensor)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    engine_note(ctx, engine, plan)
    answer_with(ctx, paste_answer(model, plan, users, tensor))
    never = ctx.t("serving.never")
    st.dataframe([{
        ctx.t("serving.col_tensor"): lay.tensor,
        ctx.t("serving.col_weights"): format_bytes(lay.weights_bytes_per_gpu, lang),
        ctx.t("serving.col_pool"): format_count(lay.kv_tokens, lang),
        ctx.t("serving.col_sequences"): format_count(lay.sequences_per_replica, lang),
        ctx.t("serving.col_replicas"): never if lay.replicas is None else format_count(lay.replicas, lang),
        ctx.t("serving.col_gpus"): never if lay.gpus is None else format_count(lay.gpus, lang),
    } for lay in plan.layouts], hide_index=True)
    best = plan.best_layout
    if best is None:
        st.error(ctx.t("serving.no_layout", gpu=gpu.name, tokens=format_count(context, lang)))
        return
    st.success(ctx.t("serving.best_layout" if best.replicas == 1 else "serving.best_layout_copies", gpus=format_count(best.gpus, lang), gpu=gpu.name, tensor=best.tensor,
                     replicas=format_count(best.replicas, lang), users=format_count(users, lang),
                     tokens=format_count(context, lang),
                     spare=format_count(best.sequences_per_replica * best.replicas - users, lang)))
    options = {"tensor": best.tensor, "replicas": best.replicas, "dtype": plan.dtype, "kv_dtype": kv_dtype,
               "context": context}
    command = vllm_command(model.load_id, **options) if engine == "vllm" else sglang_command(model.load_id, **options)
    st.code(command, language="bash", wrap_lines=True)
    if plan.dtype in ("int8", "int4"):
        st.caption(ctx.t("serving.quantized_checkpoint"))
    elif plan.dtype in SERVED_FORMATS:  # mxfp4, nvfp4, fp8-block128, torchao: the checkpoint must ship so
        st.caption(ctx.t("serving.format_checkpoint", fmt=plan.dtype))


WIDGET = Widget(
    name="serving-gpus",
    render=render,
    params=(Param("svg_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("svg_gpu", "NVIDIA L4"), Param("svg_dtype", "float8", "choice"),
            Param("svg_kv", "float8", "choice"), Param("svg_users", "200", "int"), Param("svg_context", "16384", "int"),
            Param("svg_engine", "sglang", "choice")),
)
