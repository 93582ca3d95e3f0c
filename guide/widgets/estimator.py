"""estimator#estimate: the full memory estimator. A model from the catalog, the Hub or an
uploaded config.json; the precisions to show; the model class (the checkpoint's own, or the
base model as accelerate builds it); GPUs to compare with. Out: the per-precision table, a
fit table and chart against the GPUs, the counts and the shape, and the take-away forms
(markdown, CSV, a link)."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.memory.estimate import fit_verdict, load_readings, rows_for, weight_rounding
from calculator.core.gpus import gpus
from calculator.models.seam import Model, catalog_model, resolve, resolve_upload
from calculator.core.precision import DEFAULT_DTYPES
from guide.case import dtype_choices
from guide.charts import Drawing, base_layout, capacity_line, show_chart
from calculator.core.units import GIB
from guide.format import escape_markdown, format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, share_note, show_error
from guide.widgets import gpu_name
from guide.inputs.common import case_inputs, counted_model, source_label
from guide.inputs.estimate_table import estimate_answer, parameters_line, records, table, to_csv, to_markdown

OTHER_GPUS = ("a100-80gb",)
PRECISIONS = dtype_choices()  # the storage dtypes, then every quantization format (mxfp4, nvfp4, Q4_K...)  # compared with the case's GPU unless the reader picks others


def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "es_model"}, legacy={"model": "es_hub"}, headers=True)
    cards = gpus()
    c1, c2 = st.columns(2)
    dtypes = c1.multiselect(ctx.t("estimator.dtypes"), PRECISIONS, default=list(DEFAULT_DTYPES), key="es_dtypes",
                            bind="query-params", help=ctx.t("estimator.dtypes_help"), wrap=True)
    others = [k for k in OTHER_GPUS if k != inputs.card.key]
    picked = c2.multiselect(ctx.t("estimator.gpus"), list(cards), default=others, key="es_gpus",
                            format_func=gpu_name, bind="query-params", max_selections=6,
                            help=ctx.t("estimator.gpus_help", gpu=inputs.card.name), wrap=True)
    base = st.checkbox(ctx.t("estimator.base"), value=False, key="es_base", bind="query-params",
                       help=ctx.t("estimator.base_help"))
    if inputs.failed:  # the model asked for could not be read: its message is shown, no table
        return
    counted = counted_model(ctx, inputs)
    counted = with_class(ctx, counted, "base" if base else "auto") if counted is not None else None
    if counted is not None:
        if not dtypes:
            st.info(ctx.t("estimator.no_dtypes"))
        else:
            # a link that names its GPUs gets exactly those; otherwise the case's GPU comes first
            chosen = st.query_params.get_all("es_gpus")
            compared = [cards[k] for k in picked] if chosen else \
                [inputs.card] + [cards[k] for k in picked if k != inputs.card.key]
            shown = [d for d in PRECISIONS if d in dtypes]
            _results(ctx, counted, shown, compared, base)
            if counted.source in ("catalog", "hub"):  # a command line can name it (not an upload)
                answer_with(ctx, estimate_answer(counted, shown, base))
    share_note(ctx, ctx.t("model_source.share_upload") if counted and counted.source == "upload" else None)


def with_class(ctx: Context, model: Model, model_class: str) -> Model | None:
    """The same model as the bare AutoModel (accelerate's view) or as its own class."""
    if model.summary.model_class == model_class or model.spec is None:
        return model
    try:
        if model.key:
            return catalog_model(model.key, model_class)
        if model.source == "upload":
            upload = st.session_state.get("case_upload")
            return resolve_upload(upload.getvalue()[: 2**20 + 1], upload.name, upload.size, model_class)
        return resolve(model.load_id or model.name, model_class, read_headers=True)
    except (CalculatorError, AttributeError) as error:
        if isinstance(error, CalculatorError):
            show_error(ctx, error)
        return None


def _results(ctx: Context, counted: Model, dtypes: list[str], cards: list, base: bool) -> None:
    lang = ctx.lang
    summary = counted.summary
    st.markdown(source_label(ctx, counted))
    _header_notes(ctx, counted, base)
    m1, m2 = st.columns(2)
    m1.metric(ctx.t("estimator.parameters"), format_count(summary.parameters, lang))
    if summary.active_parameters:
        m2.metric(ctx.t("estimator.active"), format_count(summary.active_parameters, lang))
    else:
        m2.metric(ctx.t("estimator.buffers"), format_bytes(summary.buffers_bytes, lang))
    shape = [escape_markdown(summary.architecture, 80)] if summary.architecture else []
    if counted.spec is not None:
        shape.append(shape_line(ctx, counted.spec))
    if shape:
        st.caption(" · ".join(shape))
    try:
        rows = rows_for(summary, dtypes, counted.spec)
    except CalculatorError as error:  # a format asked of a model counted without its shapes
        show_error(ctx, error)
        return
    headers, cells = table(ctx, rows)
    st.dataframe(records(headers, cells), hide_index=True, key="es_table")
    st.caption(ctx.t("estimate_table.note"))
    if cards:
        _fit(ctx, rows, cards, summary, counted.spec)
    _exports(ctx, counted, rows, headers, cells)


def _header_notes(ctx: Context, counted: Model, base: bool) -> None:
    """Say when the figures come from the safetensors headers, and what that means."""
    stored = counted.headers
    if counted.reason in ("remote_code", "unknown_type", "no_config"):
        st.info(ctx.t(f"estimator.headers_{counted.reason}", files=stored.files, tensors=format_count(stored.tensors, ctx.lang)),
                icon=":material/info:")
        if base:
            st.caption(ctx.t("estimator.headers_no_class"))
    if counted.reason == "quantized" and stored is not None:
        st.info(ctx.t("estimator.headers_quantized"), icon=":material/info:")
    if stored is not None:
        # dtype names come from the repository's headers: shown as plain text
        parts = ", ".join(f"{escape_markdown(d.dtype, 16)} {format_count(d.elements, ctx.lang)} "
                          f"({format_bytes(d.bytes, ctx.lang)})" for d in stored.dtypes[:12])
        st.markdown(ctx.t("estimator.stored", parts=parts, total=format_bytes(stored.stored_bytes, ctx.lang)))
        if stored.packed:
            st.warning(ctx.t("estimator.packed"), icon=":material/warning:")
    elif counted.reason == "quantized":
        st.warning(ctx.t("estimator.quantized_no_headers"), icon=":material/warning:")


def shape_line(ctx: Context, spec) -> str:
    """The architecture in one line: kind, layers, widths, attention, vocabulary, experts."""
    lang = ctx.lang
    parts = [ctx.t(f"estimator.kind_{spec.kind.replace('-', '_')}"),
             ctx.t("estimator.shape_layers", layers=spec.layers + spec.encoder_layers),
             ctx.t("estimator.shape_hidden", hidden=format_count(spec.hidden, lang)),
             ctx.t("estimator.shape_heads", heads=spec.heads, kv=spec.kv_heads),
             ctx.t("estimator.shape_mlp" + ("_gated" if spec.gated_mlp else ""),
                   width=format_count(spec.intermediate, lang))]
    if spec.vocab:
        parts.append(ctx.t("estimator.shape_vocab", vocab=format_count(spec.vocab, lang)))
    if spec.experts:
        parts.append(ctx.t("estimator.shape_experts", experts=spec.experts, active=spec.experts_per_token))
    return " · ".join(parts)


def _fit(ctx: Context, rows, cards, summary, spec) -> None:
    """Does each precision load on each GPU (the memory a process gets, with the headroom):
    a table with the three readings of the loaded weights, and a chart of the totals."""
    lang = ctx.lang
    fits, loaded = [], []
    for row in rows:
        readings = load_readings(summary, row.dtype, spec=spec)
        loaded.append({ctx.t("estimate_table.col_dtype"): row.dtype,
                       ctx.t("readings.allocated"): format_bytes(readings.allocated_bytes, lang),
                       ctx.t("readings.reserved"): format_bytes(readings.reserved_bytes, lang),
                       ctx.t("readings.nvidia_smi"): format_bytes(readings.nvidia_smi_bytes, lang)})
        line = {ctx.t("estimate_table.col_dtype"): row.dtype}
        for card in cards:
            verdict = fit_verdict(row.total_bytes, row.rule_of_thumb_bytes, Budget(card),
                                  weight_rounding(summary, row.dtype, spec))
            line[card.name] = ctx.t(f"estimator.fit_{verdict}")
        fits.append(line)
    st.dataframe(fits, hide_index=True, key="es_fits")
    st.caption(ctx.t("estimator.fit_note"))
    st.dataframe(loaded, hide_index=True, key="es_readings")
    st.caption(ctx.t("readings.explain"))
    fig = Drawing()
    fig.add_bar(x=[r.dtype for r in rows], y=[r.total_bytes / GIB for r in rows], name=ctx.t("estimator.bar_total"),
                marker_color="#3366cc")
    fig.add_bar(x=[r.dtype for r in rows], y=[r.rule_of_thumb_bytes / GIB for r in rows],
                name=ctx.t("estimator.bar_rule"), marker_color="#9ecae1")
    for card in cards:
        capacity_line(fig, card.usable_bytes, ctx.t("estimator.usable_line", gpu=card.name,
                                                    size=format_bytes(card.usable_bytes, lang)))
    fig.update_layout(barmode="group")
    base_layout(fig, ctx.t("common.dtype"), ctx.t("common.memory_axis"), lang)
    show_chart(fig, key="es_chart")


def _exports(ctx: Context, counted: Model, rows, headers, cells) -> None:
    with st.expander(ctx.t("estimator.markdown"), icon=":material/content_copy:"):
        st.caption(ctx.t("estimator.markdown_help"))
        st.code(markdown_export(ctx, counted, headers, cells), language="markdown", wrap_lines=False)
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in counted.name)[:80] or "model"
    st.download_button(ctx.t("estimator.csv"), to_csv(counted.name, counted.summary, rows),
                       file_name=f"memory-{stem}.csv", mime="text/csv", icon=":material/download:",
                       key="es_csv", on_click="ignore")


def markdown_export(ctx: Context, counted: Model, headers, cells) -> str:
    """What a support answer pastes: the model, the table as shown, the units."""
    title = ctx.t("estimator.markdown_title", name=counted.name.replace("`", "'"),
                  parameters=parameters_line(ctx, counted.summary),
                  cls=ctx.t("estimator.class_stored" if counted.source == "safetensors"
                            else f"estimator.class_{counted.summary.model_class}"))
    return f"{title}\n\n{to_markdown(headers, cells)}\n\n{ctx.t('estimator.markdown_units')}\n"


WIDGET = Widget(
    name="estimator",
    render=render,
    params=(Param("es_model", "mistralai/Mixtral-8x7B-v0.1", "choice"), Param("es_dtypes", "int4", "choice"), Param("es_base", "true", "bool"),
            gpu_param("es_gpus", "NVIDIA H100 SXM")),
)
