"""slow-model#batch-size: memory against batch size, the largest batch that fits, and the
throughput and latency each batch size gives (roofline)."""

from __future__ import annotations

import streamlit as st

from calculator.inference import inference_memory, largest_batch
from calculator.speed import decode_step, generation
from guide.charts import capacity_line, stacked_memory
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import dtype_picker, gpu_picker, model_picker, tokens_input

KEYS = ("bs_model", "bs_gpu", "bs_dtype", "bs_prompt", "bs_new")


def batch_sizes(largest: int) -> list[int]:
    """Powers of two up to a bit past the largest batch that fits, and that batch itself."""
    sizes, b = [], 1
    while b <= max(2 * largest, 8) and len(sizes) < 12:
        sizes.append(b)
        b *= 2
    if largest and largest not in sizes:
        sizes.append(largest)
    return sorted(sizes)


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2, c3 = st.columns(3)
    model = model_picker(ctx, "bs_model", container=c1)
    gpu = gpu_picker(ctx, "bs_gpu", container=c2)
    dtype = dtype_picker(ctx, "bs_dtype", container=c3)
    c4, c5 = st.columns(2)
    prompt = tokens_input(ctx, "batch_size.prompt", "bs_prompt", 1024, container=c4)
    new = tokens_input(ctx, "batch_size.new_tokens", "bs_new", 256, high=131_072, container=c5)
    context = prompt + new
    capacity = gpu.memory_bytes
    if model.spec.kind not in ("decoder", "encoder-decoder"):
        st.info(ctx.t("batch_size.not_generative"))
    largest = largest_batch(model.summary, model.spec, capacity, context, dtype=dtype)
    sizes = batch_sizes(largest)
    memories = [inference_memory(model.summary, model.spec, b, context, dtype) for b in sizes]
    fig = stacked_memory(
        [str(b) for b in sizes],
        {ctx.t("batch_size.weights"): [m.weights_bytes for m in memories],
         ctx.t("batch_size.kv_cache"): [m.kv_cache_bytes for m in memories],
         ctx.t("batch_size.activations"): [m.activation_peak_bytes for m in memories]},
        ctx.t("batch_size.x_axis"), ctx.t("common.memory_axis"), lang)
    capacity_line(fig, capacity, ctx.t("common.capacity_of", gpu=gpu.name))
    st.plotly_chart(fig, config={"displayModeBar": False}, key="bs_chart")
    if largest:
        st.success(ctx.t("batch_size.largest", batch=largest, context=format_number(context, 0, lang), gpu=gpu.name))
    else:
        st.error(ctx.t("batch_size.none_fits", gpu=gpu.name,
                       weights=format_bytes(memories[0].weights_bytes, lang), capacity=format_bytes(capacity, lang)))
    if model.spec.kind in ("decoder", "encoder-decoder"):
        _speed_table(ctx, model, gpu, dtype, prompt, new, sizes, largest)
    share_box(ctx, KEYS)


def _speed_table(ctx: Context, model, gpu, dtype: str, prompt: int, new: int, sizes: list[int], largest: int) -> None:
    lang = ctx.lang
    rows = []
    for b in sizes:
        run = generation(model.summary, model.spec, gpu, dtype, b, prompt, new)
        rows.append({
            ctx.t("batch_size.col_batch"): b,
            ctx.t("batch_size.col_fits"): "✓" if b <= largest else "✗",
            ctx.t("batch_size.col_ttft"): format_number(run.time_to_first_token * 1000, 1, lang),
            ctx.t("batch_size.col_tpot"): format_number(run.time_per_token * 1000, 2, lang),
            ctx.t("batch_size.col_throughput"): format_number(run.tokens_per_second, 0, lang),
            ctx.t("batch_size.col_bound"): ctx.t(f"batch_size.bound_{run.decode_bound}"),
        })
    st.dataframe(rows, hide_index=True)
    step = decode_step(model.summary, model.spec, gpu, dtype, 1, prompt + new // 2)
    st.markdown(ctx.t(
        "batch_size.formula",
        bytes=format_bytes(step.bytes_moved, lang, system="decimal"), bandwidth=format_number(gpu.bandwidth_gbs, 0, lang),
        memory_ms=format_number(step.memory_seconds * 1000, 2, lang),
        gflops=format_number(step.flops / 1e9, 1, lang), tflops=format_number(gpu.matmul_tflops(dtype), 0, lang),
        compute_ms=format_number(step.compute_seconds * 1000, 3, lang),
    ))


WIDGET = Widget(
    name="batch-size",
    render=render,
    params=(Param("bs_model", "mistralai/Mistral-7B-v0.1"), Param("bs_gpu", "NVIDIA A100 80GB SXM"),
            Param("bs_dtype", "int4"), Param("bs_prompt", "4096"), Param("bs_new", "64")),
)
