"""quantization#formats: a model and a GPU -> the memory of each real quantization format,
from the model's own matrices, and which formats fit."""

from __future__ import annotations

import streamlit as st

from calculator.memory.format_support import support_of
from calculator.memory.quantization import DEFAULT_GROUP_SIZE, GGUF_BLOCKS, GROUP_SIZES, shipped_format
from calculator.answers.verdicts import formats_answer
from guide.charts import GIB, Drawing, base_layout, capacity_line, show_chart
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs
from guide.inputs.workload import work_of, workload_note

MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}
FAMILY_COLOURS = {"bf16": "#9aa5b1", "float8": "#8c564b", "bitsandbytes": "#3366cc", "gptq": "#2ca02c",
                  "awq": "#98df8a", "gguf": "#ff7f0e", "microscaling": "#9467bd", "torchao": "#e377c2"}


def answer_for(inputs, group: int):
    """The page's request to the engine (pure: the parity test calls it without Streamlit), in
    the case's workload; a generation keeps the chapter's old reading (lengths_for)."""
    work = work_of(inputs)
    return formats_answer(inputs.model, inputs.card, inputs.batch, inputs.prompt, inputs.new_tokens, group,
                          work=None if work.workload == "generation" else work)


def paste_answer(inputs, group: int, answer):
    """The quantize command's answer for this table (its JSON, as `quantize --json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.formats_json import quantize_json

    typed = inputs.model.key or inputs.model.name
    argv = (typed, "--gpu", inputs.card.key, "--group-size", str(group), "--batch", str(inputs.batch),
            "--prompt", str(inputs.prompt), "--new-tokens", str(inputs.new_tokens))
    data = quantize_json(inputs.model, inputs.card, group, answer.detail, answer, inputs.batch, inputs.prompt,
                         inputs.new_tokens)
    return answer_of("quantize", data, argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "qz_model", "gpu": "qz_gpu", "batch": "qz_batch", "prompt": "qz_prompt",
                               "new_tokens": "qz_new"})
    model, gpu = inputs.model, inputs.card
    group = st.selectbox(ctx.t("quantization.group_size"), list(GROUP_SIZES),
                         index=GROUP_SIZES.index(DEFAULT_GROUP_SIZE), key="qz_group", bind="query-params",
                         help=ctx.t("quantization.group_size_help"))
    work = work_of(inputs)
    workload_note(ctx, work)
    answer = answer_for(inputs, group)
    results, peaks = answer.detail, {row["format"]: row for row in answer.figures["formats"]}
    verdicts = {name: row["verdict"] for name, row in peaks.items()}
    answer_with(ctx, paste_answer(inputs, group, answer))
    rows = []
    for r in results:
        rows.append({
            ctx.t("quantization.col_format"): r.format,
            ctx.t("quantization.col_bits"): format_number(r.bits_per_quantized_weight, 2, lang) if r.quantized_parameters else "16",
            ctx.t("quantization.col_quantized"): format_bytes(r.quantized_bytes, lang),
            ctx.t("quantization.col_kept"): format_bytes(r.kept_bytes + r.buffers_bytes, lang),
            ctx.t("quantization.col_total"): format_bytes(r.total_bytes, lang),
            ctx.t("quantization.col_real_bits"): format_number(r.bits_per_parameter, 2, lang),
            ctx.t("quantization.col_peak"): format_bytes(peaks[r.format]["peak_bytes"], lang),
            ctx.t("quantization.col_fits"): MARKS[verdicts[r.format]],
            ctx.t("quantization.col_source"): layout_source(ctx, r.format, r.family),
            ctx.t("quantization.col_loader"): loader_text(ctx, r.format),
        })
    st.dataframe(rows, hide_index=True)
    fig = Drawing().add_bar(x=[r.format for r in results], y=[r.total_bytes / GIB for r in results],
                            marker_color=[FAMILY_COLOURS[r.family] for r in results])
    fig.update_xaxes(type="category")
    capacity_line(fig, answer.figures["usable_bytes"], ctx.t("common.usable_on", gpu=gpu.name))
    base_layout(fig, ctx.t("quantization.col_format"), ctx.t("common.memory_axis"), lang, height=340)
    show_chart(fig, key="qz_chart")
    fitting, tight = answer.figures["fitting"], answer.figures["tight"]
    run = ctx.t("quantization.run_of", batch=inputs.batch, tokens=format_number(peaks[results[0].format]["context"], 0, lang)) \
        if work.workload == "generation" else ctx.t("quantization.run_of_items", batch=inputs.batch)
    if not fitting:
        st.error(ctx.t("quantization.none_fit", gpu=gpu.name, smallest=format_bytes(min(r.total_bytes for r in results), lang))
                 + " " + run)
    elif len(fitting) == len(results):
        st.success(ctx.t("quantization.all_fit", gpu=gpu.name) + " " + run)
    else:
        st.info(ctx.t("quantization.some_fit", gpu=gpu.name, formats=", ".join(fitting)) + " " + run)
    if tight:
        st.caption(ctx.t("quantization.tight", formats=", ".join(tight)))
    bnb = next(r for r in results if r.format == "bnb-nf4")
    gguf = next(r for r in results if r.format == "Q4_K")
    notes = [ctx.t("quantization.kept_note", kept=format_bytes(bnb.kept_bytes, lang),
                   share=format_number(100 * bnb.kept_bytes / bnb.total_bytes, 0, lang))]
    if model.summary.groups.get("experts") and model.spec.experts:
        notes.append(ctx.t("quantization.experts_note"))
        notes.append(ctx.t("quantization.experts_torchao_note"))
    shipped = shipped_format(model.config)
    if shipped:
        stored = next((r for r in results if r.format == shipped), None)
        if stored is not None:
            notes.append(ctx.t("quantization.shipped_note", format=shipped, size=format_bytes(stored.total_bytes, lang)))
    if gguf.fallback_parameters:
        notes.append(ctx.t("quantization.fallback_note", share=format_number(
            100 * gguf.fallback_parameters / gguf.quantized_parameters, 0, lang)))
    st.caption(" ".join(notes))


def layout_source(ctx: Context, name: str, family: str) -> str:
    """Where a format's layout comes from, in the reader's language (the calculator's own
    `source` is the English one the command line prints)."""
    if family == "gguf":
        weights, size = GGUF_BLOCKS[name]
        return ctx.t("quantization.source.gguf", block=f"block_{name.lower()}", bytes=size, weights=weights)
    return ctx.t(f"quantization.source.{name}")


def loader_text(ctx: Context, name: str) -> str:
    """Who loads a format, in the reader's language (calculator/memory/format_support.py's facts)."""
    support = support_of(name)
    engines = ", ".join(support.engines)
    if support.native == "always" and not support.transformers:
        return ctx.t("quantization.loader.plain", engines=engines)
    if support.native == "always" and not engines:
        return ctx.t("quantization.loader.only", cls=support.transformers)
    return ctx.t(f"quantization.loader.{support.native}", cls=support.transformers, engines=engines)


WIDGET = Widget(
    name="quant-formats",
    render=render,
    params=(Param("qz_model", "mistralai/Mixtral-8x7B-v0.1", "choice"), gpu_param("qz_gpu", "NVIDIA A100 80GB SXM"),
            Param("qz_group", "32", "int"), Param("qz_batch", "8", "int"), Param("qz_prompt", "8192", "int"), Param("qz_new", "2048", "int")),
)
