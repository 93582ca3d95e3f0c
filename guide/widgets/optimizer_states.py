"""fine-tuning#optimizer-states: weights, gradients and optimizer states of one model with
AdamW, 8-bit AdamW, SGD with momentum and Adafactor."""

from __future__ import annotations

import streamlit as st

from dataclasses import replace

from calculator.training import OPTIMIZERS, training_memory
from guide.format import format_bytes, format_count, format_number
from guide.widgets import Context, Param, Widget
from guide.charts import show_chart
from guide.inputs.training import component_chart, training_case



def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs, base = training_case(ctx, {"model": "os_model", "precision": "os_precision", "method": "os_method"},
                                 micro_batch=1, sequence=1)
    model, traits = inputs.model, inputs.model.traits
    memories = [training_memory(model.summary, model.spec, replace(base, optimizer=name), traits=traits)
                for name in OPTIMIZERS]
    trainable = memories[0].trainable_parameters
    parts = {"weights": [m.weights_bytes - m.master_weights_bytes for m in memories],
             "master": [m.master_weights_bytes for m in memories],
             "gradients": [m.gradients_bytes for m in memories],
             "optimizer": [m.optimizer_bytes for m in memories]}
    fig = component_chart(ctx, list(OPTIMIZERS), parts, ctx.t("training.optimizer"))
    show_chart(fig, key="os_chart")
    rows = []
    for name, memory in zip(OPTIMIZERS, memories):
        rows.append({
            ctx.t("training.optimizer"): name,
            ctx.t("optimizer_states.col_per_parameter"): format_number(memory.optimizer_bytes / trainable, 3, lang),
            ctx.t("optimizer_states.col_states"): format_bytes(memory.optimizer_bytes, lang),
            ctx.t("optimizer_states.col_model_states"): format_bytes(memory.model_state_bytes, lang),
        })
    st.dataframe(rows, hide_index=True)
    adamw, adafactor = memories[0].optimizer_bytes, memories[OPTIMIZERS.index("adafactor")].optimizer_bytes
    st.caption(ctx.t("optimizer_states.caption", trainable=format_count(trainable, lang),
                     ratio=format_number(adamw / max(adafactor, 1), 0, lang)))


WIDGET = Widget(
    name="optimizer-states",
    render=render,
    params=(Param("os_model", "mistralai/Mistral-7B-v0.1", "choice"), Param("os_precision", "float32", "choice"),
            Param("os_method", "full", "choice")),
)
