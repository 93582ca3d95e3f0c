"""cpu-offloading#zero-offload: where ZeRO-Offload keeps each part of mixed-precision Adam
training of the case's model on the case's GPU, and whether the PCIe transfers hide behind the
GPU's work."""

from __future__ import annotations

import streamlit as st

from calculator.distributed.offload import tokens_to_hide_transfers, zero_offload
from calculator.answers.verdicts import zero_offload_answer
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, tokens_input


def paste_answer(model, card, tokens: int):
    """`zero-offload --markdown`'s answer for this case (its JSON, built as the command builds it)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.offload_multi import zero_offload_json

    typed = model.key or model.name
    argv = (typed, "--gpu", card.key, "--tokens", str(tokens))
    return answer_for("zero-offload", zero_offload_json(model, card, tokens), argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "zo_model", "gpu": "zo_gpu"})
    model, gpu = inputs.model, inputs.card
    tokens = tokens_input(ctx, "offload.step_tokens", "zo_tokens", 16384, high=10**7, step=1024)
    z = zero_offload(model.summary.trainable_parameters, gpu, tokens)
    marks = zero_offload_answer(z, gpu).figures["per_gpu_verdicts"]  # before activations: the states alone
    st.dataframe([
        {ctx.t("offload.col_setup"): ctx.t("offload.plain"), ctx.t("offload.col_gpu"): format_bytes(z.gpu_plain_bytes, lang),
         ctx.t("offload.col_cpu"): format_bytes(0, lang),
         ctx.t("offload.col_fits"): "✓" if marks[0] == "fits" else "✗"},
        {ctx.t("offload.col_setup"): ctx.t("offload.zero"), ctx.t("offload.col_gpu"): format_bytes(z.gpu_offload_bytes, lang),
         ctx.t("offload.col_cpu"): format_bytes(z.cpu_offload_bytes, lang),
         ctx.t("offload.col_fits"): "✓" if marks[1] == "fits" else "✗"},
    ], hide_index=True)
    m1, m2 = st.columns(2)
    m1.metric(ctx.t("offload.transfer"), ctx.t("common.seconds", n=format_number(z.transfer_seconds, 2, lang)))
    m2.metric(ctx.t("offload.compute"), ctx.t("common.seconds", n=format_number(z.compute_seconds, 2, lang)))
    threshold = tokens_to_hide_transfers(z.parameters, gpu)
    message = ctx.t("offload.zero_hidden" if z.hidden else "offload.zero_exposed",
                    link=z.link, threshold=format_number(threshold, 0, lang), gpu=gpu.name)
    (st.success if z.hidden else st.warning)(message)
    answer_with(ctx, paste_answer(model, gpu, tokens))


WIDGET = Widget(
    name="zero-offload",
    render=render,
    params=(Param("zo_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("zo_gpu", "NVIDIA GeForce RTX 4090"),
            Param("zo_tokens", "1024", "int")),
)
