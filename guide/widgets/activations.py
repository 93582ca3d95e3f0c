"""fine-tuning#activations: what the backward pass keeps, against the sequence length, with
no recomputation, selective recomputation and full checkpointing; what one layer keeps; the
largest micro-batch for each."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.training import ATTENTION, CHECKPOINTING, activation_model, korthikanti_layer_bytes, \
    largest_micro_batch, training_memory
from guide.charts import Drawing, base_layout, capacity_line, show_chart
from calculator.core.units import GIB
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, gpu_param, show_error
from guide.inputs.training import positions_note, softcap_caveat, training_case



def sequence_lengths(chosen: int, limit: int) -> list[int]:
    """Powers of two from 512 to 32k (or the model's shorter context window), and the chosen length."""
    top = max(min(limit or 32_768, 32_768), 512)
    lengths, n = [], 512
    while n <= top:
        lengths.append(n)
        n *= 2
    return sorted(set(lengths) | {chosen})


def render(ctx: Context) -> None:
    lang = ctx.lang
    options = list(ATTENTION)
    attention = st.selectbox(ctx.t("training.attention"), options, key="ac_attention", bind="query-params",
                             help=ctx.t("training.attention_help"))
    inputs, base = training_case(ctx, {"model": "ac_model", "gpu": "ac_gpu", "precision": "ac_precision",
                                       "method": "ac_method", "batch": "ac_batch", "sequence": "ac_sequence"},
                                 attention=attention)
    model, gpu, batch, sequence = inputs.model, inputs.card, base.micro_batch, base.sequence
    if positions_note(ctx, model, sequence):
        return
    budget = Budget(gpu)
    traits = model.traits
    try:
        chosen = {mode: training_memory(model.summary, model.spec, replace(base, checkpointing=mode), traits=traits)
                  for mode in CHECKPOINTING}
    except CalculatorError as error:
        show_error(ctx, error)
        return
    lengths = sequence_lengths(sequence, model.spec.max_positions)
    fig = Drawing()
    labels = [format_number(n, 0, lang) for n in lengths]
    for mode in CHECKPOINTING:
        peaks = [training_memory(model.summary, model.spec, replace(base, checkpointing=mode, sequence=n),
                                 traits=traits).total_bytes / GIB for n in lengths]
        fig.add_scatter(x=labels, y=peaks, mode="lines+markers", name=ctx.t(f"activations.mode_{mode}"))
    fig.update_xaxes(type="category")
    base_layout(fig, ctx.t("training.sequence"), ctx.t("common.memory_axis"), lang, height=340)
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="ac_chart")

    columns = st.columns(3)
    largest = {}
    for column, mode in zip(columns, CHECKPOINTING):
        largest[mode] = largest_micro_batch(model.summary, model.spec, budget,
                                            replace(base, checkpointing=mode), traits=traits)
        column.metric(ctx.t(f"activations.mode_{mode}"), format_bytes(chosen[mode].activations_bytes, lang))
    st.markdown(ctx.t("activations.largest", gpu=gpu.name, sequence=format_number(sequence, 0, lang),
                      none=largest["none"], selective=largest["selective"], full=largest["full"]))

    layer = activation_model(model.summary, model.spec, traits, base)
    rows = [{ctx.t("activations.col_what"): ctx.t(f"activations.group_{group}"),
             ctx.t("activations.col_bytes"): format_bytes(size, lang)} for group, size in layer.layer_groups().items()
            if size]
    rows.append({ctx.t("activations.col_what"): ctx.t("activations.group_total"),
                 ctx.t("activations.col_bytes"): format_bytes(layer.layer_tensors_bytes, lang)})
    st.markdown(ctx.t("activations.layer_title", layers=model.spec.layers + model.spec.encoder_layers))
    st.dataframe(rows, hide_index=True)
    korthikanti = korthikanti_layer_bytes(batch, sequence, model.spec.hidden, model.spec.heads)
    st.caption(ctx.t("activations.korthikanti", formula=format_bytes(korthikanti.total_bytes, lang),
                     linear=format_bytes(korthikanti.linear_bytes, lang),
                     ours=format_bytes(layer.layer_tensors_bytes, lang),
                     logits=format_bytes(layer.loss_saved, lang)))
    softcap_caveat(ctx, model)


WIDGET = Widget(
    name="activations",
    render=render,
    params=(Param("ac_model", "google/gemma-2-9b", "choice"), gpu_param("ac_gpu", "NVIDIA H200 SXM"), Param("ac_precision", "float32", "choice"),
            Param("ac_method", "full", "choice"), Param("ac_batch", "2", "int"), Param("ac_sequence", "8192", "int"),
            Param("ac_attention", "eager", "choice")),
)
