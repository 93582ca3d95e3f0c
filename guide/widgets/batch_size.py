"""slow-model#batch-size: memory against batch size on the case's GPU, the largest batch that
fits (and the one only the headroom admits), and the throughput and latency each batch size
gives (roofline), in the case's workload: tokens per second for generation, items per second
for a forward pass, a sequence-to-sequence answer or an image, audio hours per hour for
speech; how long the case's items take; and a speed the reader measured against the ceiling."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget, readings_of
from calculator.memory.inference import inference_memory
from calculator.memory.speed import decode_step, generation
from calculator.answers.verdicts import card_chose_float16, compute_dtype_for, largest_batch_answer
from calculator.memory.workload_speed import workload_speed
from calculator.memory.workloads import shape
from guide.charts import capacity_line, show_chart, stacked_memory
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, readings_row


def batch_sizes(largest: int, chosen: int = 1) -> list[int]:
    """Powers of two up to a bit past the largest batch that fits, that batch and the case's."""
    sizes, b = [], 1
    while b <= max(2 * largest, 8) and len(sizes) < 12:
        sizes.append(b)
        b *= 2
    return sorted(set(sizes) | ({largest} if largest else set()) | {chosen})


def work_of(inputs):
    """The run one item of the case's workload makes (calculator/memory/workloads.py)."""
    return shape(inputs.model.spec, inputs.work, prompt=inputs.prompt, new_tokens=inputs.new_tokens,
                 sequence=inputs.prompt)


def speed_dtype(inputs):
    """The precision the case computes in on its card, and the assumption saying so: the
    case's bfloat16 is float16 on a card without bfloat16 tensor cores (speed's and
    data-parallel's default)."""
    return compute_dtype_for(inputs.card, inputs.dtype)


def answer_for(inputs):
    """The page's request to the engine (pure: the parity test calls it without Streamlit)."""
    return largest_batch_answer(inputs.model, inputs.card, work_of(inputs).memory_lengths, dtype=speed_dtype(inputs)[0])


def paste_answer(inputs, work, sizes: list[int]):
    """The speed command's answer over the batch sizes this table shows (its JSON, as `speed --json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.parallel_json import speed_json

    typed = inputs.model.key or inputs.model.name
    dtype, precision = speed_dtype(inputs)
    # bfloat16 is speed's own default: the command then chooses the card's precision as the page does
    dtypes = () if inputs.dtype == "bfloat16" else ("--dtypes", dtype)
    argv = (typed, "--gpu", inputs.card.key, *dtypes, "--workload", work.workload,
            "--prompt", str(inputs.prompt), "--new-tokens", str(inputs.new_tokens), "--sequence", str(inputs.prompt),
            "--batches", *map(str, sizes))
    data = speed_json(inputs.model, inputs.card, [dtype], work, sizes, precision if not dtypes else None)
    return answer_of("speed", data, argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "bs_model", "gpu": "bs_gpu", "dtype": "bs_dtype", "prompt": "bs_prompt",
                               "new_tokens": "bs_new"})
    (model, gpu), (dtype, precision) = (inputs.model, inputs.card), speed_dtype(inputs)
    work = work_of(inputs)
    if card_chose_float16(precision.value):
        st.caption(ctx.t("data_parallel.float16_note", gpu=gpu.name))
    if work.workload != "generation":
        st.info(ctx.t(f"batch_size.workload_{work.workload}", frames=work.encoder_tokens or 0, tokens=work.prompt))
    lengths = work.memory_lengths
    budget = Budget(gpu)
    answer = answer_for(inputs)
    largest = answer.figures["largest_batch"]
    sizes = batch_sizes(largest, inputs.batch)
    answer_with(ctx, paste_answer(inputs, work, sizes))
    memories = [inference_memory(model.summary, model.spec, b, dtype=dtype, **lengths) for b in sizes]
    fig = stacked_memory(
        [str(b) for b in sizes],
        {ctx.t("batch_size.weights"): [m.weights_bytes for m in memories],
         ctx.t("batch_size.kv_cache"): [m.kv_cache_bytes for m in memories],
         ctx.t("batch_size.activations"): [m.activation_peak_bytes for m in memories]},
        ctx.t("batch_size.x_axis"), ctx.t("common.memory_axis"), lang)
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="bs_chart")
    chosen = memories[sizes.index(inputs.batch)]
    readings_row(ctx, readings_of(chosen, budget), gpu)
    tokens = format_number(chosen.context, 0, lang)
    if largest:
        beyond = answer.figures["largest_batch_tight"]
        st.success(ctx.t("batch_size.largest", batch=largest, context=tokens, gpu=gpu.name)
                   + (" " + ctx.t("batch_size.tight", batch=beyond) if beyond > largest else ""))
    else:
        st.error(ctx.t("batch_size.none_fits", gpu=gpu.name, weights=format_bytes(memories[0].weights_bytes, lang),
                       capacity=format_bytes(budget.usable_bytes, lang)))
    if work.workload == "generation":
        _speed_table(ctx, model, gpu, dtype, inputs.prompt, inputs.new_tokens, sizes, largest)
    else:
        _workload_table(ctx, model, gpu, dtype, work, sizes, largest)
    from guide.inputs.measured import job_time, measured_box

    at_case = workload_speed(model.summary, model.spec, gpu, dtype, inputs.batch, work)
    job_time(ctx, at_case, inputs.items)
    measured_box(ctx, at_case, "bs_measured")
    _code(ctx, model, work, inputs)


def _code(ctx: Context, model, work, inputs) -> None:
    """The loop that reaches these speeds, for the case's workload and model."""
    from calculator.memory.workload_snippets import workload_snippet

    with st.expander(ctx.t("workload_snippet.code_title"), icon=":material/code:"):
        st.caption(ctx.t("workload_snippet.code_help"))
        st.code(workload_snippet(work.workload, model.name, inputs.batch, speed_dtype(inputs)[0], ctx.lang, prompt=inputs.prompt,
                                 new_tokens=inputs.new_tokens, classifier=model.spec.head == "classifier"),
                language="python")


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


def _workload_table(ctx: Context, model, gpu, dtype: str, work, sizes: list[int], largest: int) -> None:
    """Every workload but generation, in items per second: one forward per batch (forward,
    vision), or the encoder then the decoder's answer (seq2seq, speech: audio hours per hour)."""
    lang = ctx.lang
    rows = []
    for b in sizes:
        run = workload_speed(model.summary, model.spec, gpu, dtype, b, work)
        row = {ctx.t("batch_size.col_batch"): b, ctx.t("batch_size.col_fits"): "✓" if b <= largest else "✗"}
        if work.generates:
            row[ctx.t("batch_size.col_first")] = format_number(run.time_to_first_token * 1000, 1, lang)
            row[ctx.t("batch_size.col_tpot")] = format_number(run.time_per_token * 1000, 2, lang)
        else:
            row[ctx.t("batch_size.col_forward")] = format_number(run.seconds_per_batch * 1000, 2, lang)
        row[ctx.t(f"batch_size.col_items_{work.workload}")] = format_number(run.items_per_second, 1, lang)
        if work.workload == "speech":
            row[ctx.t("batch_size.col_audio")] = format_number(run.audio_hours_per_hour, 0, lang)
        row[ctx.t("batch_size.col_limit")] = ctx.t(f"batch_size.bound_{run.bound}")
        rows.append(row)
    st.dataframe(rows, hide_index=True)


WIDGET = Widget(
    name="batch-size",
    render=render,
    params=(Param("bs_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("bs_gpu", "NVIDIA A100 80GB SXM"),
            Param("bs_dtype", "int4", "choice"), Param("bs_prompt", "4096", "int"), Param("bs_new", "64", "int"),
            Param("bs_measured", "900", "float")),
)
