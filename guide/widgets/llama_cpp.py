"""cpu-offloading#llama-cpp: for a GGUF model on the case's GPU, the largest `-ngl` that fits
for a quantization type and a context, the memory on the GPU and in CPU RAM, how much slower
decoding gets, and the command to paste."""

from __future__ import annotations

import streamlit as st

from calculator.answers.markdown import answer_for
from calculator.core.errors import CalculatorError
from calculator.distributed.llama_cpp import CACHE_TYPES, DEFAULT_CPU_GBS, GGUF_TYPES, MAX_CONTEXT, plan_llama_cpp
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs, tokens_input



def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "lc_model", "gpu": "lc_gpu"})
    model, card = inputs.model, inputs.card
    c1, c2, c3, c4 = st.columns(4)
    types = list(GGUF_TYPES)
    gguf_type = c1.selectbox(ctx.t("llama_cpp.type"), types, index=types.index("Q4_K"), key="lc_type",
                             bind="query-params", help=ctx.t("llama_cpp.type_help"))
    context = tokens_input(ctx, "llama_cpp.context", "lc_context", 8192, high=MAX_CONTEXT, container=c2, step=1024)
    caches = list(CACHE_TYPES)
    cache = c3.selectbox(ctx.t("llama_cpp.cache"), caches, key="lc_cache", bind="query-params",
                         help=ctx.t("llama_cpp.cache_help"))
    cpu_gbs = c4.number_input(ctx.t("llama_cpp.cpu_gbs"), min_value=1.0, max_value=10_000.0, value=DEFAULT_CPU_GBS,
                              step=1.0, key="lc_cpu_gbs", bind="query-params", help=ctx.t("llama_cpp.cpu_gbs_help"))
    try:
        plan = plan_llama_cpp(model.summary, model.spec, card, gguf_type, context, cache, float(cpu_gbs),
                              config=model.config)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    layout, side = plan.layout, plan.split
    slots = layout.layers + 1
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("llama_cpp.ngl"), f"{plan.ngl} / {slots}", help=ctx.t("llama_cpp.ngl_help", layers=layout.layers))
    m2.metric(ctx.t("llama_cpp.on_gpu"), format_bytes(side.gpu_bytes, lang),
              help=ctx.t("llama_cpp.on_gpu_help", limit=format_bytes(plan.limit_bytes, lang), gpu=card.name))
    m3.metric(ctx.t("llama_cpp.on_cpu"), format_bytes(side.cpu_bytes, lang))
    m4.metric(ctx.t("llama_cpp.speed"), ctx.t("llama_cpp.tokens_per_second",
                                               n=format_number(plan.tokens_per_second, 1, lang)),
              delta=None if plan.all_on_gpu else ctx.t("llama_cpp.slower", x=format_number(plan.slowdown, 1, lang)),
              delta_color="inverse")
    _verdict(ctx, plan, card)
    rows = [(ctx.t("llama_cpp.side_gpu"), side.gpu_weights_bytes, side.gpu_kv_bytes, side.gpu_compute_bytes,
             side.gpu_bytes),
            (ctx.t("llama_cpp.side_cpu"), side.cpu_weights_bytes, side.cpu_kv_bytes, side.cpu_compute_bytes,
             side.cpu_bytes)]
    st.dataframe([{ctx.t("llama_cpp.col_side"): name, ctx.t("llama_cpp.col_weights"): format_bytes(w, lang),
                   ctx.t("llama_cpp.col_kv"): format_bytes(kv, lang), ctx.t("llama_cpp.col_compute"): format_bytes(c, lang),
                   ctx.t("llama_cpp.col_total"): format_bytes(total, lang)} for name, w, kv, c, total in rows],
                 hide_index=True)
    st.caption(ctx.t("llama_cpp.estimates", file=format_bytes(layout.file_bytes, lang), type=layout.type,
                     head=layout.head_type, cells=format_number(layout.cells, 0, lang),
                     compute=format_bytes(max(layout.logits_buffer_bytes, layout.layers_buffer_bytes), lang)))
    _experts(ctx, plan)
    st.code(plan.command(), language="bash")
    typed = model.key or model.name
    argv = (typed, "--gpu", card.key, "--type", gguf_type, "--context", str(context), "--cache-type", cache,
            "--cpu-bandwidth", f"{float(cpu_gbs):g}")
    answer_with(ctx, answer_for("llama-cpp", {"model": model.name, **plan.to_json()}, argv, typed))


def _experts(ctx: Context, plan) -> None:
    """A mixture of experts: --n-cpu-moe weighed against -ngl (the engine chose the faster)."""
    if plan.moe is None or plan.all_on_gpu:
        return
    lang, moe = ctx.lang, plan.moe
    key = "llama_cpp.moe_better" if plan.better == "n-cpu-moe" else "llama_cpp.moe_not_better"
    st.info(ctx.t(key, n=moe.n_cpu_moe, gpu_layers=plan.layout.layers - moe.n_cpu_moe,
                  gpu=format_bytes(moe.gpu_bytes, lang), cpu=format_bytes(moe.cpu_bytes, lang),
                  tps=format_number(moe.tokens_per_second, 1, lang),
                  ngl_tps=format_number(plan.tokens_per_second, 1, lang), ngl=plan.ngl))


def _verdict(ctx: Context, plan, card) -> None:
    lang = ctx.lang
    layout, side = plan.layout, plan.split
    if plan.all_on_gpu:
        st.success(ctx.t("llama_cpp.all_fit", ngl=plan.ngl, gpu=card.name, size=format_bytes(side.gpu_bytes, lang),
                         tps=format_number(plan.tokens_per_second, 0, lang)))
    elif plan.ngl == 0:
        st.error(ctx.t("llama_cpp.none_fit", gpu=card.name, limit=format_bytes(plan.limit_bytes, lang),
                       output=format_bytes(layout.output_bytes, lang)))
    else:
        st.warning(ctx.t("llama_cpp.partial", ngl=plan.ngl, gpu_layers=side.gpu_layers, layers=layout.layers,
                         cpu_layers=layout.layers - side.gpu_layers, gpu=card.name,
                         cpu=format_bytes(side.cpu_bytes, lang), x=format_number(plan.slowdown, 1, lang),
                         gbs=format_number(plan.cpu_gbs, 1, lang),
                         gpu_gbs=format_number(card.bandwidth_gbs, 0, lang)))


WIDGET = Widget(
    name="llama-cpp",
    render=render,
    params=(Param("lc_model", "meta-llama/Llama-3.1-70B", "choice"), gpu_param("lc_gpu", "NVIDIA GeForce RTX 4090"),
            Param("lc_type", "Q8_0", "choice"), Param("lc_context", "131072", "int"), Param("lc_cache", "q8_0", "choice"),
            Param("lc_cpu_gbs", "50", "float", given=(("lc_model", "meta-llama/Llama-3.1-70B"),))),
)
