"""slow-model#batch-size: memory against batch size on the case's GPU, the largest batch that
fits (and the one only the headroom admits), and the throughput and latency each batch size
gives (roofline). A model that does not generate runs one forward per batch: sequences per
second, no answer length."""

from __future__ import annotations

import streamlit as st

from calculator.budget import Budget, readings_of
from calculator.inference import can_generate, inference_memory, largest_batch
from calculator.speed import decode_step, forward_pass, generation
from guide.charts import capacity_line, stacked_memory
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, gpu_param
from guide.widgets.common import case_inputs, readings_row, tight



def batch_sizes(largest: int, chosen: int = 1) -> list[int]:
    """Powers of two up to a bit past the largest batch that fits, that batch and the case's."""
    sizes, b = [], 1
    while b <= max(2 * largest, 8) and len(sizes) < 12:
        sizes.append(b)
        b *= 2
    return sorted(set(sizes) | ({largest} if largest else set()) | {chosen})


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "bs_model", "gpu": "bs_gpu", "dtype": "bs_dtype", "prompt": "bs_prompt",
                               "new_tokens": "bs_new"})
    model, gpu, dtype = inputs.model, inputs.card, inputs.dtype
    generates = can_generate(model.spec)
    if not generates:
        st.info(ctx.t("batch_size.not_generative"))
    lengths = {"prompt": inputs.prompt, "new_tokens": inputs.new_tokens} if generates else {"context": inputs.prompt}
    budget = Budget(gpu)
    largest = largest_batch(model.summary, model.spec, budget, dtype=dtype, **lengths)
    sizes = batch_sizes(largest, inputs.batch)
    memories = [inference_memory(model.summary, model.spec, b, dtype=dtype, **lengths) for b in sizes]
    fig = stacked_memory(
        [str(b) for b in sizes],
        {ctx.t("batch_size.weights"): [m.weights_bytes for m in memories],
         ctx.t("batch_size.kv_cache"): [m.kv_cache_bytes for m in memories],
         ctx.t("batch_size.activations"): [m.activation_peak_bytes for m in memories]},
        ctx.t("batch_size.x_axis"), ctx.t("common.memory_axis"), lang)
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    st.plotly_chart(fig, config={"displayModeBar": False}, key="bs_chart")
    chosen = memories[sizes.index(inputs.batch)]
    readings_row(ctx, readings_of(chosen, budget), gpu)
    tokens = format_number(chosen.context, 0, lang)
    if largest:
        beyond = largest_batch(model.summary, model.spec, tight(budget), dtype=dtype, **lengths)
        st.success(ctx.t("batch_size.largest", batch=largest, context=tokens, gpu=gpu.name)
                   + (" " + ctx.t("batch_size.tight", batch=beyond) if beyond > largest else ""))
    else:
        st.error(ctx.t("batch_size.none_fits", gpu=gpu.name, weights=format_bytes(memories[0].weights_bytes, lang),
                       capacity=format_bytes(budget.usable_bytes, lang)))
    if generates:
        _speed_table(ctx, model, gpu, dtype, inputs.prompt, inputs.new_tokens, sizes, largest)
    else:
        _forward_table(ctx, model, gpu, dtype, inputs.prompt, sizes, largest)


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


def _forward_table(ctx: Context, model, gpu, dtype: str, tokens: int, sizes: list[int], largest: int) -> None:
    """Encoders and classifiers: one forward per batch, in sequences per second."""
    lang = ctx.lang
    rows = []
    for b in sizes:
        step = forward_pass(model.summary, model.spec, gpu, dtype, b, tokens)
        rows.append({
            ctx.t("batch_size.col_batch"): b,
            ctx.t("batch_size.col_fits"): "✓" if b <= largest else "✗",
            ctx.t("batch_size.col_forward"): format_number(step.seconds * 1000, 2, lang),
            ctx.t("batch_size.col_sequences"): format_number(b / step.seconds, 0, lang),
            ctx.t("batch_size.col_bound"): ctx.t(f"batch_size.bound_{step.bound}"),
        })
    st.dataframe(rows, hide_index=True)


WIDGET = Widget(
    name="batch-size",
    render=render,
    params=(Param("bs_model", "mistralai/Mistral-7B-v0.1"), gpu_param("bs_gpu", "NVIDIA A100 80GB SXM"),
            Param("bs_dtype", "int4"), Param("bs_prompt", "4096"), Param("bs_new", "64")),
)
