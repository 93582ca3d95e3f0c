"""serving#serving-memory: how an engine splits one card: its share, the weights, the profile
run's reserve, the non-torch growth, and the KV pool left over, in blocks and tokens."""

from __future__ import annotations

import streamlit as st

from calculator.answers.markdown import answer_for
from calculator.core.errors import CalculatorError
from calculator.serving.plan import serve
from guide.charts import Drawing, base_layout, show_chart
from calculator.core.units import GIB
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs
from guide.inputs.serving import (WEIGHT_CHOICES, asked_dtype, dtype_args, engine_picker, limit_input, serving_case,
                                  share_input, shipped_note)

COLORS = {"weights": "#5b7db1", "reserve": "#ff9f40", "non_torch": "#c49c94", "graphs": "#bcbd22", "pool": "#9ecae1",
          "outside": "#dddddd"}


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "svm_model", "gpu": "svm_gpu", "dtype": "svm_dtype"}, dtypes=WEIGHT_CHOICES)
    model, gpu, dtype = inputs.model, inputs.card, asked_dtype(ctx, inputs)
    c4, c5, c6 = st.columns(3)
    engine = engine_picker(ctx, "svm_engine", container=c4)
    utilization = share_input(ctx, "svm_util", container=c5)
    batched = limit_input(ctx, "serving.batched_tokens", "svm_batched", 16, 131_072, step=1024, container=c6,
                          help_key="serving.batched_tokens_help")
    users, context, tensor = serving_case(ctx)
    try:
        plan = serve(model, gpu, engine=engine, dtype=dtype, context=context, users=users, tensor=tensor,
                     utilization=utilization, max_num_batched_tokens=batched, layouts=False)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    shipped_note(ctx, model, gpu, engine, plan)
    r = plan.replica
    reserve_key = "serving.part_reserve" if engine == "vllm" else "serving.part_reserve_sglang"
    parts = [("weights", "serving.part_weights", r.weights_bytes_per_gpu),
             ("reserve", reserve_key, r.activation_reserve_bytes),
             ("non_torch", "serving.part_non_torch", r.non_torch_bytes),
             ("graphs", "serving.part_graphs", r.cuda_graph_bytes),
             ("pool", "serving.part_pool", r.kv_pool_bytes_per_gpu),
             ("outside", "serving.part_outside", max(plan.total_bytes_per_gpu - r.requested_bytes_per_gpu
                                                       - (r.activation_reserve_bytes if engine == "sglang" else 0), 0))]
    fig = Drawing()
    for name, label, size in parts:
        if size > 0:
            fig.add_bar(y=[gpu.name], x=[size / GIB], name=ctx.t(label), orientation="h",
                        marker_color=COLORS[name], hovertemplate="%{x:.2f}")
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    base_layout(fig, ctx.t("common.memory_axis"), "", lang, height=220)
    show_chart(fig, key="svm_chart")
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("serving.metric_pool"), format_bytes(r.kv_pool_bytes_per_gpu, lang))
    m2.metric(ctx.t("serving.metric_tokens"), format_count(r.kv_tokens, lang))
    m3.metric(ctx.t("serving.metric_reserve"), format_bytes(r.activation_reserve_bytes, lang))
    if r.available_kv_bytes_per_gpu <= 0:
        st.error(ctx.t("serving.no_cache_room", gpu=gpu.name, weights=format_bytes(r.weights_bytes_per_gpu, lang),
                       share=format_bytes(r.requested_bytes_per_gpu, lang)))
    elif r.memory_verdict == "too_big":
        st.error(ctx.t("serving.over_usable", share=format_bytes(r.requested_bytes_per_gpu, lang),
                       usable=format_bytes(gpu.usable_bytes, lang), gpu=gpu.name))
    elif r.memory_verdict == "tight":
        st.warning(ctx.t("serving.share_tight", share=format_bytes(r.requested_bytes_per_gpu, lang),
                         usable=format_bytes(gpu.usable_bytes, lang), gpu=gpu.name))
    else:
        st.success(ctx.t("serving.share_fits", share=format_bytes(r.requested_bytes_per_gpu, lang), gpu=gpu.name,
                         tokens=format_count(r.kv_tokens, lang)))
    if engine == "vllm":
        st.caption(ctx.t("serving.profile_caption", tokens=format_count(plan.max_num_batched_tokens, lang),
                         rows=format_count(plan.max_num_seqs, lang), moment=ctx.t(f"serving.moment_{r.profile_moment}"),
                         blocks=format_count(r.kv_blocks, lang)))
    else:
        st.caption(ctx.t("serving.sglang_caption", share=format_bytes(r.requested_bytes_per_gpu, lang),
                         reserve=format_bytes(r.activation_reserve_bytes, lang)))
    answer_with(ctx, _answer(model, plan, utilization, batched))


def _answer(model, plan, utilization, batched):
    """The serve command's answer for this calculation (its JSON is the plan's, as `serve --json` writes it)."""
    typed = model.key or model.name
    argv = [typed, "--gpu", plan.gpu, *dtype_args(plan), "--context", str(plan.context), "--engine", plan.engine]
    if batched is not None:  # left to the engine's default: no flag (it would read "None")
        argv += ["--max-num-batched-tokens", str(batched)]
    if utilization is not None:
        argv += ["--gpu-memory-utilization", f"{utilization:g}"]
    from calculator.answers.serving_json import serve_json

    data = serve_json(model, plan)
    return answer_for("serve", data, tuple(argv), typed)


WIDGET = Widget(
    name="serving-memory",
    render=render,
    params=(Param("svm_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("svm_gpu", "NVIDIA A100 80GB SXM"),
            Param("svm_dtype", "float8", "choice"), Param("svm_engine", "sglang", "choice"), Param("svm_util", "0.95", "float"),
            Param("svm_batched", "4096", "int", given=(("svm_engine", "vllm"),))),
)
