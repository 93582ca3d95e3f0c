"""estimator#accuracy: the latest measurements of bench/accuracy.py against the calculator,
per device, as a summary per kind, a chart of predicted against measured and every row.
Everything shown is read from the result files (calculator/answers/accuracy.py); nothing is typed."""

from __future__ import annotations

import streamlit as st

from bench import RESULTS_DIR
from calculator.core.units import MIB
from calculator.answers.accuracy import KINDS, ResultRow, ResultRun, latest_runs, summarize
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_bytes, format_number, format_percent
from guide.widgets import Context, Param, Widget

COLORS = {"load": "#3366cc", "inference": "#ff9900", "training": "#109618"}
SYMBOLS = {"development": "circle", "check": "diamond"}


def parameters_label(ctx: Context, count: int | None) -> str:
    if not count:
        return "—"
    if count >= 10**9:
        return ctx.t("accuracy.billions", n=format_number(count / 1e9, 2, ctx.lang))
    return ctx.t("accuracy.millions", n=format_number(count / 1e6, 1 if count < 10**7 else 0, ctx.lang))


def settings_label(ctx: Context, row: ResultRow) -> str:
    s = row.settings
    if row.kind == "load":
        return ctx.t("accuracy.settings_load", dtype=s["dtype"])
    if row.kind == "inference":
        return ctx.t("accuracy.settings_inference", mode=ctx.t(f"accuracy.mode_{s['mode']}"), batch=s["batch"],
                     context=format_number(s["context"], 0, ctx.lang), dtype=s["dtype"], attention=s["attention"])
    method = ctx.t("accuracy.method_lora", rank=s["lora_rank"]) if s["method"] == "lora" else \
        ctx.t("accuracy.method_full")
    checkpointing = ctx.t("accuracy.with_checkpointing") if s["checkpointing"] != "none" else ""
    return ctx.t("accuracy.settings_training", method=method, precision=ctx.t(f"accuracy.precision_{s['precision']}"),
                 batch=s["micro_batch"], sequence=format_number(s["sequence"], 0, ctx.lang),
                 checkpointing=checkpointing)


def run_heading(ctx: Context, run: ResultRun) -> None:
    lang, device = ctx.lang, run.device
    minutes = format_number(run.seconds / 60, 0 if run.seconds >= 600 else 1, lang)
    common = {"device": ctx.t(f"accuracy.device_{run.device_type}"), "name": device.get("name", "?"),
              "date": run.started[:10], "minutes": minutes}
    if run.device_type == "cuda":
        st.markdown(ctx.t("accuracy.run_title_gpu", memory=format_bytes(device.get("memory_bytes"), lang), **common))
    else:
        st.markdown(ctx.t("accuracy.run_title", cores=ctx.t("accuracy.cores", n=device.get("cores", "?")), **common))
    v = run.versions
    st.caption(ctx.t("accuracy.versions", torch=v.get("torch", "?"), transformers=v.get("transformers", "?"),
                     peft=v.get("peft", "?"), accelerate=v.get("accelerate", "?"), python=v.get("python", "?"),
                     measure=ctx.t(f"accuracy.measure_{run.device_type}")))
    if device.get("cuda_context_bytes"):
        st.info(ctx.t("accuracy.cuda_context", size=format_bytes(device["cuda_context_bytes"], lang)),
                icon=":material/memory:")
    if not run.complete or run.skipped:
        st.warning(ctx.t("accuracy.incomplete", skipped=len(run.skipped)))


def summary_table(ctx: Context, rows: list[ResultRow]) -> list[dict[str, str]]:
    lang = ctx.lang
    table = []
    for s in summarize(rows):
        missed = s.cases - s.within
        table.append({
            ctx.t("accuracy.col_kind"): ctx.t(f"accuracy.kind_{s.kind}"),
            ctx.t("accuracy.col_target"): "± " + format_percent(s.target, lang),
            ctx.t("accuracy.col_cases"): str(s.cases),
            ctx.t("accuracy.col_within"): str(s.within),
            ctx.t("accuracy.col_median"): format_percent(s.median_abs_error, lang, 2),
            ctx.t("accuracy.col_largest"): format_percent(s.largest_abs_error, lang, 2),
            ctx.t("accuracy.col_verdict"): ctx.t("accuracy.verdict_missed", n=missed) if missed
            else ctx.t("accuracy.verdict_met"),
        })
    return table


def signed_percent(error: float, lang: str) -> str:
    text = format_percent(abs(error), lang, 2)
    return ("+" if error >= 0 else "−") + text


def rows_table(ctx: Context, run: ResultRun, rows: list[ResultRow]) -> list[dict[str, str]]:
    lang = ctx.lang
    return [{
        ctx.t("accuracy.col_kind"): ctx.t(f"accuracy.kind_{r.kind}"),
        ctx.t("accuracy.col_model"): r.model,
        ctx.t("accuracy.col_parameters"): parameters_label(ctx, run.parameters(r.model)),
        ctx.t("accuracy.col_settings"): settings_label(ctx, r),
        ctx.t("accuracy.col_split"): ctx.t(f"accuracy.split_{r.split}"),
        ctx.t("accuracy.col_measured"): format_bytes(r.measured_bytes, lang),
        ctx.t("accuracy.col_predicted"): format_bytes(r.predicted_bytes, lang),
        ctx.t("accuracy.col_error"): signed_percent(r.error, lang),
        ctx.t("accuracy.col_met"): ctx.t("accuracy.met") if r.within_target else ctx.t("accuracy.missed"),
    } for r in rows]


def chart(ctx: Context, rows: list[ResultRow]) -> Drawing:
    """Predicted against measured, log-log, one colour per kind, the diagonal where they agree."""
    lang = ctx.lang
    fig = Drawing()
    for kind in KINDS:
        chosen = [r for r in rows if r.kind == kind]
        if not chosen:
            continue
        fig.add_scatter(
            x=[r.measured_bytes / MIB for r in chosen], y=[r.predicted_bytes / MIB for r in chosen], mode="markers",
            name=ctx.t(f"accuracy.kind_{kind}"),
            marker=dict(color=COLORS[kind], size=9, symbol=[SYMBOLS[r.split] for r in chosen], opacity=0.8,
                        line=dict(width=1, color="white")),
            text=[f"{r.model} · {settings_label(ctx, r)}<br>{ctx.t('accuracy.hover_error')} "
                  f"{signed_percent(r.error, lang)}" for r in chosen],
            hovertemplate="%{text}<extra></extra>",
        )
    sizes = [v for r in rows for v in (r.measured_bytes / MIB, r.predicted_bytes / MIB)]
    low, high = min(sizes) / 1.5, max(sizes) * 1.5
    fig.add_scatter(x=[low, high], y=[low, high], mode="lines", name=ctx.t("accuracy.chart_exact"),
                    line=dict(color="#888", dash="dot", width=1), hoverinfo="skip")
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    base_layout(fig, ctx.t("accuracy.chart_x"), ctx.t("accuracy.chart_y"), lang, height=420)
    fig.update_layout(hovermode="closest")
    return fig


def render(ctx: Context) -> None:
    st.caption(ctx.t("accuracy.show"))
    columns = st.columns(4)
    shown = [kind for kind, column in zip(KINDS, columns)
             if column.checkbox(ctx.t(f"accuracy.kind_{kind}"), value=True, key=f"acc_{kind}", bind="query-params")]
    check_only = columns[3].checkbox(ctx.t("accuracy.check_only"), value=False, key="acc_check",
                                     bind="query-params", help=ctx.t("accuracy.check_only_help"))
    runs = latest_runs(RESULTS_DIR)
    if not runs:
        st.info(ctx.t("accuracy.no_runs"))
    for run in runs:
        run_heading(ctx, run)
        rows = [r for r in run.rows if r.kind in shown and (r.split == "check" or not check_only)]
        if not rows:
            st.info(ctx.t("accuracy.no_rows"))
            continue
        st.dataframe(summary_table(ctx, rows), hide_index=True)
        show_chart(chart(ctx, rows), key=f"acc_chart_{run.device_type}")
        st.caption(ctx.t("accuracy.chart_caption"))
        st.dataframe(rows_table(ctx, run, rows), hide_index=True)
    if all(run.device_type != "cuda" for run in runs):
        st.info(ctx.t("accuracy.no_gpu"), icon=":material/developer_board:")


WIDGET = Widget(
    name="accuracy",
    render=render,
    params=(Param("acc_load", "false", "bool"), Param("acc_inference", "false", "bool"), Param("acc_training", "false", "bool"),
            Param("acc_check", "true", "bool")),
)
