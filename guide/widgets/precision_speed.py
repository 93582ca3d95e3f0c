"""slow-model#precision: memory and expected speed of the case's model in each precision, on
the case's GPU, batch and lengths; whether each fits, with the headroom."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget, readings_of
from calculator.memory.inference import inference_memory
from calculator.memory.workload_speed import workload_speed
from calculator.memory.workloads import shape
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs

SHOWN = ("float32", "float16", "bfloat16", "int8", "int4", "bnb-nf4", "gptq-4bit")
MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "pr_model", "gpu": "pr_gpu", "prompt": "pr_prompt", "batch": "pr_batch"})
    model, gpu, batch = inputs.model, inputs.card, inputs.batch
    work = shape(model.spec, inputs.work, prompt=inputs.prompt, new_tokens=inputs.new_tokens, sequence=inputs.prompt)
    generates = work.workload == "generation"
    lengths = work.memory_lengths
    budget = Budget(gpu)
    rows, speeds = [], []
    for dtype in SHOWN:
        memory = inference_memory(model.summary, model.spec, batch, dtype=dtype, **lengths)
        verdict = readings_of(memory, budget).verdict
        speed = workload_speed(model.summary, model.spec, gpu, dtype, batch, work)
        speeds.append(speed.ceiling)
        if generates:
            timing = {ctx.t("batch_size.col_ttft"): format_number(speed.time_to_first_token * 1000, 1, lang),
                      ctx.t("batch_size.col_throughput"): format_number(speed.tokens_per_second, 0, lang)}
        else:
            timing = {ctx.t(f"batch_size.col_items_{work.workload}"): format_number(speed.items_per_second, 1, lang)}
        rows.append({ctx.t("common.dtype"): dtype, ctx.t("precision.col_weights"): format_bytes(memory.weights_bytes, lang),
                     ctx.t("precision.col_peak"): format_bytes(memory.total_bytes, lang),
                     ctx.t("precision.col_fits"): MARKS[verdict], **timing})
    st.dataframe(rows, hide_index=True)
    colors = ["#9aa5b1", "#6baed6", "#3366cc", "#2ca02c", "#17becf", "#8c6bb1", "#e6550d"]
    fig = Drawing().add_bar(x=list(SHOWN), y=speeds, marker_color=colors)
    axis = "precision.speed_axis" if generates else f"batch_size.col_items_{work.workload}"
    base_layout(fig, ctx.t("common.dtype"), ctx.t(axis), lang, height=300)
    show_chart(fig, key="pr_chart")
    bf16, int4 = speeds[SHOWN.index("bfloat16")], speeds[SHOWN.index("int4")]
    st.caption(ctx.t("precision.caption", ratio=format_number(int4 / bf16, 1, lang), gpu=gpu.name)
               + " " + ctx.t("precision.marks", batch=batch))
    if not gpu.has_bf16_tensor_cores:
        st.info(ctx.t("precision.no_bf16", gpu=gpu.name))
    answer_with(ctx, paste_answer(inputs, work, batch))


def paste_answer(inputs, work, batch: int):
    """`speed --dtypes ...` at this batch: each plain precision's speed and verdict (its JSON, as `speed --json`
    writes it)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.parallel_json import speed_json

    from calculator.core.precision import DTYPES

    answered = [dtype for dtype in SHOWN if dtype in DTYPES]  # the command's precisions (not bnb-nf4, gptq-4bit)
    typed = inputs.model.key or inputs.model.name
    argv = (typed, "--gpu", inputs.card.key, "--dtypes", *answered, "--workload", work.workload,
            "--prompt", str(inputs.prompt), "--new-tokens", str(inputs.new_tokens), "--sequence", str(inputs.prompt),
            "--batches", str(batch))
    return answer_for("speed", speed_json(inputs.model, inputs.card, answered, work, [batch]), argv, typed)


WIDGET = Widget(
    name="precision-speed",
    render=render,
    params=(Param("pr_model", "meta-llama/Llama-2-13b-hf", "choice"), gpu_param("pr_gpu", "NVIDIA H100 SXM"),
            Param("pr_prompt", "128", "int"), Param("pr_batch", "16", "int")),
)
