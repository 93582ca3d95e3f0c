"""The per-precision table of a counted model, and its take-away forms.

One function builds the cells the reader sees; the markdown export is made from those same
cells, so what is pasted in a support answer is what the page showed. The CSV holds the
CLI's JSON rows (bytes as integers, stable column names), for spreadsheets and scripts.
"""

from __future__ import annotations

import csv
import io

from calculator.memory.estimate import Row
from calculator.models.summary import ModelSummary
from guide.format import format_bytes, format_count
from guide.widgets import Context

CSV_COLUMNS = ("model", "model_class", "parameters", "dtype", "bytes_per_param", "total_bytes", "largest_layer",
               "largest_layer_bytes", "training_adam_bytes", "rule_of_thumb_bytes")


def table(ctx: Context, rows: tuple[Row, ...]) -> tuple[list[str], list[list[str]]]:
    """Headers and cells, in the reader's language and units."""
    lang = ctx.lang
    headers = [ctx.t(f"estimate_table.col_{name}") for name in ("dtype", "largest", "total", "rule", "training")]
    cells = []
    for row in rows:
        largest = format_bytes(row.largest_layer_bytes, lang)
        if row.largest_layer:
            largest = f"{largest} ({row.largest_layer})"
        cells.append([
            row.dtype,
            largest,
            format_bytes(row.total_bytes, lang),
            format_bytes(row.rule_of_thumb_bytes, lang),
            format_bytes(row.training_adam_bytes, lang) if row.training_adam_bytes is not None else "—",
        ])
    return headers, cells


def records(headers: list[str], cells: list[list[str]]) -> list[dict[str, str]]:
    """The table as st.dataframe takes it."""
    return [dict(zip(headers, row)) for row in cells]


def to_markdown(headers: list[str], cells: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table of exactly these cells (pipes escaped)."""
    def line(values) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"
    return "\n".join([line(headers), line(["---"] * len(headers)), *(line(row) for row in cells)])


def to_csv(name: str, summary: ModelSummary, rows: tuple[Row, ...]) -> str:
    """The rows as `python -m calculator estimate --json` gives them, one line per dtype."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([name, summary.model_class, summary.parameters, row.dtype, f"{row.bytes_per_param:g}",
                         row.total_bytes, row.largest_layer, row.largest_layer_bytes,
                         "" if row.training_adam_bytes is None else row.training_adam_bytes,
                         row.rule_of_thumb_bytes])
    return out.getvalue()


def parameters_line(ctx: Context, summary: ModelSummary) -> str:
    """The parameter count, and the active count of a mixture-of-experts model."""
    text = ctx.t("estimate_table.parameters", count=format_count(summary.parameters, ctx.lang))
    if summary.active_parameters:
        text += " " + ctx.t("estimate_table.active", count=format_count(summary.active_parameters, ctx.lang))
    return text


def estimate_answer(model, dtypes, base: bool = False):
    """The estimate command's answer for this table (its JSON is estimate_model's, as `estimate
    --json` writes it): the estimator's and memory-estimate#exact-count's "Copy as answer"."""
    from calculator.answers.markdown import answer_for
    from calculator.memory.estimate import estimate_model

    typed = model.key or model.name
    argv = (typed, "--dtypes", *dtypes, *(("--model-class", "base") if base else ()))
    return answer_for("estimate", estimate_model(model, tuple(dtypes)).to_json(), argv, typed)
