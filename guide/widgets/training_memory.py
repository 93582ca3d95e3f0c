"""fine-tuning#training-memory: inference, the 4 x 2X = 8X GB rule and our breakdown of one
training step, side by side for the same model."""

from __future__ import annotations

import streamlit as st

from calculator.errors import CalculatorError
from calculator.inference import inference_memory
from calculator.training import TrainingSetup, largest_micro_batch, rule_of_thumb_bytes, rule_of_thumb_split, \
    training_memory
from guide.charts import capacity_line
from guide.format import format_billions, format_bytes, format_number
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import gpu_picker, model_picker
from guide.widgets.training_inputs import COMPONENTS, component_chart, moment, number, optimizer_picker, \
    precision_picker, show_error, softcap_caveat

KEYS = ("tm_model", "tm_gpu", "tm_precision", "tm_optimizer", "tm_batch", "tm_sequence")


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2 = st.columns(2)
    model = model_picker(ctx, "tm_model", container=c1)
    gpu = gpu_picker(ctx, "tm_gpu", default="h100", container=c2)
    c3, c4, c5, c6 = st.columns(4)
    precision = precision_picker(ctx, "tm_precision", container=c3)
    optimizer = optimizer_picker(ctx, "tm_optimizer", container=c4)
    batch = number(ctx, "micro_batch", "tm_batch", 1, 4096, container=c5)
    sequence = number(ctx, "sequence", "tm_sequence", 2048, 1_048_576, container=c6, step=256)
    setup = TrainingSetup(precision=precision, optimizer=optimizer, micro_batch=batch, sequence=sequence)
    traits = model.traits
    try:
        memory = training_memory(model.summary, model.spec, setup, traits=traits)
        largest = largest_micro_batch(model.summary, model.spec, gpu.memory_bytes, setup, traits=traits)
    except CalculatorError as error:
        show_error(ctx, error)
        share_box(ctx, KEYS)
        return
    inference = inference_memory(model.summary, model.spec, batch, min(sequence, 10**8), "bfloat16")
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
    capacity_line(fig, gpu.memory_bytes, ctx.t("common.capacity_of", gpu=gpu.name))
    st.plotly_chart(fig, config={"displayModeBar": False}, key="tm_chart")

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
                       capacity=format_bytes(gpu.memory_bytes, lang)))
    softcap_caveat(ctx, model)
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="training-memory",
    render=render,
    params=(Param("tm_model", "meta-llama/Llama-3.2-1B"), Param("tm_gpu", "NVIDIA GeForce RTX 4090"),
            Param("tm_precision", "bfloat16"), Param("tm_optimizer", "adamw-8bit"), Param("tm_batch", "4"),
            Param("tm_sequence", "4096")),
)
