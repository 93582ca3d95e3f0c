"""fine-tuning#training-memory: inference, the 4 x 2X = 8X GB rule and our breakdown of one
training step, side by side for the same model."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.memory.inference import can_generate, inference_memory
from calculator.training import rule_of_thumb_bytes, rule_of_thumb_split
from calculator.answers.verdicts import largest_micro_batch_answer
from guide.charts import capacity_line, show_chart
from guide.format import format_billions, format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from calculator.core.budget import Budget
from guide.inputs.common import readings_row
from guide.inputs.training import COMPONENTS, component_chart, moment, positions_note, \
    softcap_caveat, tower_note, train_answer, training_case



def answer_for(inputs, setup):
    """The page's request to the engine (pure: the parity test calls it without Streamlit)."""
    return largest_micro_batch_answer(inputs.model, inputs.card, setup)


def paste_answer(inputs, setup, answer):
    """The train command's answer for this step (the core of `train --json`, answers_training)."""
    return train_answer(inputs, setup, answer)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs, setup = training_case(ctx, {"model": "tm_model", "gpu": "tm_gpu", "precision": "tm_precision",
                                        "optimizer": "tm_optimizer", "batch": "tm_batch", "sequence": "tm_sequence"})
    model, gpu, batch, sequence = inputs.model, inputs.card, setup.micro_batch, setup.sequence
    if positions_note(ctx, model, sequence):
        return
    budget = Budget(gpu)
    try:
        answer = answer_for(inputs, setup)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    memory, largest = answer.detail, answer.figures["largest_micro_batch"]
    answer_with(ctx, paste_answer(inputs, setup, answer))
    inference = inference_memory(model.summary, model.spec, batch, sequence, "bfloat16",
                                 mode=None if can_generate(model.spec) else "forward")
    parameters = model.summary.parameters
    rule = rule_of_thumb_bytes(parameters)
    rule_parts = rule_of_thumb_split(parameters)

    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("training_memory.inference"), format_bytes(inference.total_bytes, lang))
    m2.metric(ctx.t("training_memory.rule"), format_bytes(rule, lang, system="decimal"))
    m3.metric(ctx.t("training_memory.ours"), format_bytes(memory.total_bytes, lang),
              ctx.t("training_memory.times_inference", ratio=format_number(memory.total_bytes / inference.total_bytes,
                                                                            1, lang)), delta_color="off", delta_arrow="off")
    st.markdown(ctx.t("training_memory.rule_formula", params=format_billions(parameters, lang),
                      x=format_number(parameters / 1e9, 2, lang),
                      weights=format_number(rule_parts["weights"] / 1e9, 1, lang),
                      rule=format_number(rule / 1e9, 1, lang)))

    bars = [ctx.t("training_memory.bar_inference"), ctx.t("training_memory.bar_rule"), ctx.t("training_memory.bar_ours")]
    parts = {name: [0, 0, 0] for name in COMPONENTS}
    parts["weights"][0] = inference.weights_bytes
    parts["activations"][0] = inference.kv_cache_bytes + inference.activation_peak_bytes
    for name, size in rule_parts.items():
        parts[name][1] = size
    for name, size in memory.peak_components().items():
        parts[name][2] = size
    fig = component_chart(ctx, bars, parts, "")
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="tm_chart")
    readings_row(ctx, budget.readings(memory.total_bytes, memory.steady_bytes), gpu)

    rows = [{ctx.t("training.column_part"): ctx.t(f"training.part_{name}"),
             ctx.t("training.column_size"): format_bytes(size, lang)}
            for name, size in memory.components().items() if size and name != "buffers"]
    st.dataframe(rows, hide_index=True)
    st.caption(ctx.t("training_memory.peak", moment=moment(ctx, memory),
                     fb=format_bytes(memory.forward_backward_bytes, lang),
                     step=format_bytes(memory.optimizer_step_bytes, lang)))
    if largest:
        st.success(ctx.t("training.largest_batch", batch=largest, sequence=format_number(sequence, 0, lang),
                         gpu=gpu.name))
    else:
        st.error(ctx.t("training.none_fits", gpu=gpu.name, peak=format_bytes(memory.total_bytes, lang),
                       capacity=format_bytes(budget.usable_bytes, lang)))
    softcap_caveat(ctx, model)
    tower_note(ctx, model, setup)


WIDGET = Widget(
    name="training-memory",
    render=render,
    params=(Param("tm_model", "meta-llama/Llama-3.2-1B", "choice"), gpu_param("tm_gpu", "NVIDIA GeForce RTX 4090"),
            Param("tm_precision", "float32", "choice"), Param("tm_optimizer", "adamw-8bit", "choice"), Param("tm_batch", "2", "int"),
            Param("tm_sequence", "4096", "int")),
)
