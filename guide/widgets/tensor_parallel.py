"""parallelism#tensor-parallelism: per-GPU weights for degree t (what is split, what is
replicated), and the all-reduces each forward needs over NVLink, PCIe or the network."""

from __future__ import annotations

import streamlit as st

from calculator.errors import CalculatorError
from calculator.parallel import TP_DEGREES, communication_seconds, links_for, tensor_parallel
from calculator.speed import prefill
from guide.format import format_bytes, format_number, format_percent
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import dtype_picker, gpu_picker, model_picker, tokens_input

KEYS = ("tp_model", "tp_gpu", "tp_dtype", "tp_degree", "tp_tokens")


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2 = st.columns(2)
    model = model_picker(ctx, "tp_model", default="llama-3.1-70b", container=c1)
    gpu = gpu_picker(ctx, "tp_gpu", default="h100", container=c2)
    c3, c4, c5 = st.columns(3)
    dtype = dtype_picker(ctx, "tp_dtype", container=c3)
    degree = c4.selectbox(ctx.t("parallelism.degree"), list(TP_DEGREES), index=TP_DEGREES.index(8), key="tp_degree",
                          bind="query-params", help=ctx.t("parallelism.degree_help"))
    tokens = tokens_input(ctx, "parallelism.tokens", "tp_tokens", 2048, high=1_048_576, container=c5)
    try:
        result = tensor_parallel(model.summary, model.spec, dtype, degree, tokens)
    except CalculatorError as error:
        st.error(error.message(lang))
        share_box(ctx, KEYS)
        return
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("parallelism.per_gpu"), format_bytes(result.per_gpu_bytes, lang))
    m2.metric(ctx.t("parallelism.replicated"), format_bytes(result.replicated_bytes, lang))
    m3.metric(ctx.t("parallelism.one_gpu"), format_bytes(result.total_bytes, lang))
    fits = result.per_gpu_bytes <= gpu.memory_bytes
    (st.success if fits else st.error)(ctx.t("parallelism.tp_fits" if fits else "parallelism.tp_too_big",
                                             gpu=gpu.name, t=degree))
    st.dataframe([{
        ctx.t("parallelism.col_matrix"): m.name,
        ctx.t("parallelism.col_shape"): f"{m.in_features} × {m.out_features}",
        ctx.t("parallelism.col_count"): m.count,
        ctx.t("parallelism.col_split"): ctx.t(f"parallelism.split_{m.split}"),
        ctx.t("parallelism.col_per_gpu"): format_bytes(m.bytes_per_gpu, lang),
    } for m in result.matrices], hide_index=True)
    if degree > 1:
        compute = prefill(model.summary, model.spec, gpu, dtype, 1, tokens).compute_seconds / degree
        rows = []
        for link, gbs in links_for(gpu).items():
            seconds = communication_seconds(result, gbs)
            rows.append({ctx.t("parallelism.col_link"): link,
                         ctx.t("parallelism.col_gbs"): format_number(gbs, 1, lang),
                         ctx.t("parallelism.col_comm"): format_number(seconds * 1000, 2, lang),
                         ctx.t("parallelism.col_ratio"): format_percent(seconds / compute, lang, 0)})
        st.dataframe(rows, hide_index=True)
        st.caption(ctx.t("parallelism.comm_caption", n=result.allreduces_per_forward,
                         size=format_bytes(result.allreduce_bytes, lang), tokens=format_number(tokens, 0, lang),
                         compute=format_number(compute * 1000, 2, lang), gpu=gpu.name, t=degree))
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="tensor-parallel",
    render=render,
    params=(Param("tp_model", "meta-llama/Meta-Llama-3-8B"), Param("tp_gpu", "NVIDIA L4"),
            Param("tp_dtype", "float32"), Param("tp_degree", "2"), Param("tp_tokens", "512")),
)
