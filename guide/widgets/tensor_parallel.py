"""parallelism#tensor-parallelism: per-GPU weights for degree t (what is split, what is
replicated), and the all-reduces each forward needs over NVLink, PCIe or the network."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.distributed.parallel import TP_DEGREES, communication_seconds, links_for
from calculator.memory.quantization import storage_dtype
from calculator.answers.verdicts import tensor_parallel_answer
from calculator.memory.speed import prefill
from guide.format import format_bytes, format_number, format_percent
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs


def tp_tokens(inputs) -> int:
    """Tokens per forward: the case's batch x prompt, or the calculator's own token count."""
    return inputs.batch * inputs.prompt if "prompt" not in inputs.changed else inputs.prompt


def answer_for(inputs, degree: int):
    """The page's request to the engine (pure: the parity test calls it without Streamlit)."""
    return tensor_parallel_answer(inputs.model, inputs.card, storage_dtype(inputs.dtype), degree, tp_tokens(inputs))


def paste_answer(inputs, degree: int, answer):
    """The tensor-parallel command's answer for this calculation (its JSON, as `--json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.parallel_json import tensor_parallel_json

    typed, dtype, tokens = inputs.model.key or inputs.model.name, storage_dtype(inputs.dtype), tp_tokens(inputs)
    argv = (typed, "--degree", str(degree), "--gpu", inputs.card.key, "--dtype", dtype, "--tokens", str(tokens))
    return answer_of("tensor-parallel", tensor_parallel_json(inputs.model, inputs.card, tokens, answer), argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "tp_model", "gpu": "tp_gpu", "dtype": "tp_dtype", "prompt": "tp_tokens"})
    model, gpu, dtype = inputs.model, inputs.card, storage_dtype(inputs.dtype)
    degree = st.selectbox(ctx.t("parallelism.degree"), list(TP_DEGREES), index=TP_DEGREES.index(8), key="tp_degree",
                          bind="query-params", help=ctx.t("parallelism.degree_help"))
    tokens = tp_tokens(inputs)
    try:
        answer = answer_for(inputs, degree)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    result = answer.detail
    answer_with(ctx, paste_answer(inputs, degree, answer))
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("parallelism.per_gpu"), format_bytes(result.per_gpu_bytes, lang))
    m2.metric(ctx.t("parallelism.replicated"), format_bytes(result.replicated_bytes, lang))
    m3.metric(ctx.t("parallelism.one_gpu"), format_bytes(result.total_bytes, lang))
    verdict = answer.verdict
    {"fits": st.success, "tight": st.warning, "too_big": st.error}[verdict](
        ctx.t(f"parallelism.tp_{verdict}", gpu=gpu.name, t=degree))
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


WIDGET = Widget(
    name="tensor-parallel",
    render=render,
    params=(Param("tp_model", "meta-llama/Meta-Llama-3-8B", "choice"), gpu_param("tp_gpu", "NVIDIA L4"),
            Param("tp_dtype", "float32", "choice"), Param("tp_degree", "2", "int"), Param("tp_tokens", "512", "int")),
)
