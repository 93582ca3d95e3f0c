"""serving#concurrency: the KV cache one token costs, and how many sequences of each length hold
their cache in the pool at once, with a shared prompt prefix stored once (prefix caching)."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.serving.engines import MAX_TOKENS
from calculator.serving.plan import serve
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs, tokens_input
from guide.inputs.serving import asked_dtype, case_count, dtype_args, kv_picker, serving_case



def lengths_up_to(limit: int, marked: int) -> list[int]:
    """Doublings from 512 up to the model's positions, with the reader's own length."""
    points, t = set(), 512
    while t <= limit:
        points.add(t)
        t *= 2
    return sorted(points | {min(marked, limit)})


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "svc_model", "gpu": "svc_gpu"})
    model, gpu = inputs.model, inputs.card
    c3, c4, c5 = st.columns(3)
    users, case_context, tensor = serving_case(ctx)
    context = case_count(ctx, "serving.context", "svc_context", case_context, high=MAX_TOKENS, step=128, container=c3)
    kv_dtype = kv_picker(ctx, "svc_kv", container=c4)
    prefix = tokens_input(ctx, "serving.shared_prefix", "svc_prefix", 0, low=0, container=c5)
    try:
        plan = serve(model, gpu, dtype=asked_dtype(ctx, inputs), kv_dtype=kv_dtype, context=context, tensor=tensor,
                     shared_prefix=min(prefix, context))  # with the layouts, as the answer's command
        limit = model.spec.max_positions or context
        lengths = lengths_up_to(limit, context)
        curve = [serve(model, gpu, dtype=asked_dtype(ctx, inputs), kv_dtype=kv_dtype, context=t, tensor=tensor,
                       layouts=False).replica.sequences for t in lengths]
        shared = [serve(model, gpu, dtype=asked_dtype(ctx, inputs), kv_dtype=kv_dtype, context=t, tensor=tensor,
                        shared_prefix=min(prefix, t), layouts=False).replica.sequences
                  for t in lengths] if prefix else []
    except CalculatorError as error:
        show_error(ctx, error)
        return
    r = plan.replica
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("serving.metric_per_token"), format_bytes(plan.kv_bytes_per_token, lang))
    m2.metric(ctx.t("serving.metric_one_sequence", tokens=format_count(context, lang)),
              format_bytes(plan.kv_bytes_per_token * context, lang))
    m3.metric(ctx.t("serving.metric_sequences"), format_count(r.sequences, lang))
    labels = [format_count(t, lang) for t in lengths]
    fig = Drawing().add_bar(x=labels, y=curve, name=ctx.t("serving.curve_alone"), marker_color="#5b7db1",
                            text=[format_count(n, lang) for n in curve], textposition="outside")
    if shared:
        fig.add_bar(x=labels, y=shared, name=ctx.t("serving.curve_shared", prefix=format_count(prefix, lang)),
                    marker_color="#2ca02c")
    fig.update_xaxes(type="category")
    base_layout(fig, ctx.t("serving.context_axis"), ctx.t("serving.sequences_axis"), lang, height=340)
    show_chart(fig, key="svc_chart")
    if not r.sequences:
        st.error(ctx.t("serving.none_fits", tokens=format_count(context, lang), gpu=gpu.name,
                       pool=format_count(r.kv_tokens, lang)))
    else:
        st.success(ctx.t("serving.sequences_fit", n=format_count(r.sequences, lang), tokens=format_count(context, lang),
                         gpu=gpu.name, pool=format_count(r.kv_tokens, lang), concurrency=f"{r.max_concurrency:.2f}", log_tokens=f"{context:,}"))
    if plan.replica.kv_groups > 1 or any(g.window for g in model.spec.attention):
        st.caption(ctx.t("serving.window_caption"))
    answer_with(ctx, paste_answer(model, plan, tensor, min(prefix, context)))


def paste_answer(model, plan, tensor: int, prefix: int):
    """`serve --kv-dtype --context [--shared-prefix]`'s answer: the sequences that hold their cache at once."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.serving_json import serve_json

    typed = model.key or model.name
    argv = (typed, "--gpu", plan.gpu, *dtype_args(plan), "--kv-dtype", plan.kv_dtype, "--context", str(plan.context),
            "--tensor", str(tensor), *(("--shared-prefix", str(prefix)) if prefix else ()))
    return answer_for("serve", serve_json(model, plan), argv, typed)


WIDGET = Widget(
    name="serving-concurrency",
    render=render,
    params=(Param("svc_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("svc_gpu", "NVIDIA L4"),
            Param("svc_context", "4096", "int"), Param("svc_kv", "float8", "choice"), Param("svc_prefix", "1024", "int")),
)
