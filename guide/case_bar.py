"""The case bar at the top of a chapter: the model, GPU, precision, batch and lengths every
calculator of the page starts from (guide/case.py reads and checks them).

The URL is the source of truth: each input mirrors its URL value (a link opens on its case)
and writes it back when the reader changes it, under the short names of the URL contract.
Options keep their stable values in the URL and show labels in the reader's language.
"""

from __future__ import annotations

from functools import lru_cache

import streamlit as st

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.models.seam import MAX_UPLOAD_BYTES, Model, catalog_model, resolve, resolve_upload
from guide.case import (CASE_PARAMS, CHOICES, STEPS, WHOLE_NUMBERS, Case, ResolvedCase, dtype_choices,
                        parse_value, pinned_pairs, read_case, serving_dtype, url_text)
from guide.format import escape_markdown, format_bytes
from guide.i18n import current_language, t
from guide import remembered

WIDE = {"model": 3, "gpu": 3, "dtype": 2}  # column widths in the bar (others: 2)
FIRST_ROW = frozenset({"model", "gpu", "dtype"})  # what the figures are for, on a row of their own
MAX_PER_ROW = 4  # at 1280 px, a fifth field cuts labels mid-word and values to two letters


def current_query() -> dict[str, list[str]]:
    return {name: st.query_params.get_all(name) for name in CASE_PARAMS}


def pinned_link_pairs(lang: str, case: ResolvedCase | None) -> list[tuple[str, str]]:
    """What every link a reader copies starts with (a section link, a share box): the language,
    then the case pinned, defaults written out (guide/case.py: pinned_pairs)."""
    return [("lang", lang), *pinned_pairs(case, current_query())]


def case_bar(fields: tuple[str, ...], defaults: Case, lang: str) -> ResolvedCase:
    """Draw the bar for these case fields; return the case, its model counted."""
    stored = remembered.sync()
    came_back = remembered.apply(stored, any(current_query().values()))
    case, refused, present = read_case(current_query(), defaults)
    with st.container(key="case-bar", border=True):
        st.caption(t("case.title"))
        rows = field_rows(fields)
        columns = [column for row in rows for column in st.columns([WIDE.get(name, 2) for name in row])]
        upload = _upload()  # drawn under the inputs: the columns above are filled below
        resolved = _resolve(case, defaults, upload)
        fallback = catalog_model(catalog.find(defaults.model).key)
        case, dtype_source = serving_dtype(case, present, resolved[0] if resolved[0].spec is not None else fallback,
                                           case.card)
        for column, name in zip(columns, [name for row in rows for name in row]):
            with column:
                _input(name, case.value(name), lang)
        for item in refused:
            st.warning(t("frame.bad_url_value", param=escape_markdown(item.param, 40),
                         value=escape_markdown(item.value, 60)), icon=":material/link_off:")
        _model_line(resolved, fallback)
        _summary(case, resolved[0] if resolved[0].spec is not None else fallback, fields, lang, came_back, bool(stored))
    model, error, upload_name = resolved
    return ResolvedCase(case, model if model.spec is not None else fallback, case.card, refused, error, upload_name,
                        present, headers_model=model if model.spec is None else None, fields=fields,
                        dtype_source=dtype_source)


def field_rows(fields: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The bar's rows, in the chapter's order: the model, card and precision first, then the
    chapter's other fields, at most MAX_PER_ROW a row and the rows as even as they can be
    (six fields: two rows of three, not four and two)."""
    first = tuple(name for name in fields if name in FIRST_ROW)
    rest = [name for name in fields if name not in FIRST_ROW]
    rows = [first] if first else []
    if rest:
        size = -(-len(rest) // -(-len(rest) // MAX_PER_ROW))  # ceil(n / ceil(n / MAX_PER_ROW))
        rows += [tuple(rest[at:at + size]) for at in range(0, len(rest), size)]
    return rows


def carried_query(lang: str) -> dict[str, str]:
    """What a link to another chapter carries: the language and the case the reader set, as
    the case reads it (a GPU typed "4090" travels as rtx4090; a value it refused stays behind)."""
    query = st.query_params.to_dict()  # each value the last one given; one read, not one per name
    sent = tuple((name, str(query[name])) for name in CASE_PARAMS if name in query)
    return dict(_carried(lang, sent))  # a copy: callers may add to it


@lru_cache(maxsize=256)  # asked by every link and widget text of a page (~200 times a run)
def _carried(lang: str, sent: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    query = [("lang", lang)]
    for name, value in sent:
        try:
            query.append((name, url_text(name, parse_value(name, value.strip()))))
        except ValueError:
            continue
    return tuple(query)


# -- inputs ---------------------------------------------------------------------------------

def _input(name: str, value, lang: str) -> None:
    """One input mirroring the URL's value; a change writes it back to the URL (in its
    callback, before the rerun), so the URL's value is always the one to show."""
    key = f"case_{name}"
    st.session_state[key] = value
    label, help_text = t(f"case.{name}"), t(f"case.{name}_help")
    common = dict(key=key, on_change=_write, args=(name,), help=help_text)
    if name == "model":
        options = [entry.key for entry in catalog.entries()]
        if value not in options:
            options = [value] + options
        st.selectbox(label, options, format_func=_model_label, accept_new_options=True,
                     placeholder=t("case.model_placeholder"), **common)
    elif name == "gpu":
        labels = _gpu_labels(lang, value)
        st.selectbox(label, list(labels), format_func=lambda v: labels.get(v, str(v)), accept_new_options=True,
                     **common)
    elif name == "dtype":
        st.selectbox(label, dtype_choices(), **common)
    elif name in WHOLE_NUMBERS:
        st.number_input(label, min_value=1, max_value=WHOLE_NUMBERS[name], step=STEPS.get(name, 128), **common)
    elif name in CHOICES:
        st.selectbox(label, list(CHOICES[name]), format_func=lambda v, n=name: t(f"case.{n}_{v}"), **common)


def _write(name: str) -> None:
    value = st.session_state.get(f"case_{name}")
    if value is None or value == "":
        return
    if name == "model":
        entry = catalog.find(str(value))
        value = entry.key if entry else str(value).strip()
    if name == "gpu":  # a card typed by its name or memory travels as its key ("5090": rtx5090)
        try:
            value = parse_value("gpu", str(value).strip())
        except ValueError:
            value = str(value).strip()[:60]  # the case refuses it, with a message, on the rerun
    st.query_params[name] = str(int(value) if name in WHOLE_NUMBERS else value)
    if name in remembered.REMEMBERED:
        remembered.remember({key: st.query_params.get(key) for key in remembered.REMEMBERED})


def _model_label(value) -> str:
    entry = catalog.find(str(value))
    return entry.id if entry else str(value)


def _gpu_labels(lang: str, current: str) -> dict[str, str]:
    """Each card under its group, with the total PyTorch sees on it, in the reader's units;
    the case's own card first when the reader typed it (custom:12GiB)."""
    from calculator.core.gpus import gpu, gpus

    cards = dict(gpus())
    if current not in cards:
        cards = {current: gpu(current), **cards}
    return {key: f"{t('case.gpu_group_' + card.group)} · {card.name} ({format_bytes(card.total_bytes, lang)})"
            for key, card in cards.items()}


def _upload():
    with st.popover(t("case.upload"), icon=":material/upload_file:"):
        st.caption(t("case.upload_help"))
        return st.file_uploader(t("case.upload_label"), type=None, accept_multiple_files=False, key="case_upload",
                                label_visibility="collapsed")


# -- the case at a glance --------------------------------------------------------------------

def _summary(case: Case, model: Model, fields: tuple[str, ...], lang: str, came_back: bool, stored: bool) -> None:
    """One line written from the resolved case, whole at any width (the inputs above cut long
    names): the model the calculators use, the card with what a process can use on it, the
    precision; and the browser's memory of the case, with the way to clear it."""
    card = case.card
    text = t("case.summary_dtype" if "dtype" in fields else "case.summary", model=escape_markdown(model.name, 160),
             card=escape_markdown(card.name, 120), total=format_bytes(card.total_bytes, lang),
             usable=format_bytes(card.usable_bytes, lang), dtype=escape_markdown(str(case.dtype), 40))
    with st.container(key="case-summary"):
        st.markdown(text)
    if came_back:
        st.caption(t("case.came_back"))
    if remembered.dropped():
        st.caption(t("case.dropped"))
    elif st.session_state.get(remembered.STATE, {}).get("forget"):
        st.caption(t("case.forgotten"))
    elif stored or remembered.pending():
        st.button(t("case.forget"), key="case_forget", on_click=remembered.forget, type="tertiary",
                  icon=":material/history_toggle_off:", help=t("case.forget_help"))


# -- the model ------------------------------------------------------------------------------

def _spinner(step: str, name: str):
    return st.spinner(t(f"model_source.{step}", name=escape_markdown(name), repo=escape_markdown(name)),
                      show_time=True)


def _resolve(case: Case, defaults: Case, upload) -> tuple[Model, CalculatorError | None, str]:
    """The case's model: an upload, else the named model (catalog or Hub), through the model
    seam. When it cannot be read, the chapter's default model stands in and the error is kept."""
    try:
        if upload is not None:
            raw = upload.getvalue()[: MAX_UPLOAD_BYTES + 1]
            return resolve_upload(raw, upload.name, upload.size, progress=_spinner), None, upload.name
        return resolve(case.model, read_headers=True, hub_id=catalog.find(case.model) is None,
                       progress=_spinner), None, ""
    except CalculatorError as error:
        return catalog_model(catalog.find(defaults.model).key), error, ""


def _model_line(resolved, fallback: Model) -> None:
    model, error, upload = resolved
    if error is not None:
        shown = error.shown_params(current_language())
        params = {key: escape_markdown(value, 160) for key, value in shown.items()}
        st.error(t(f"error.{error.code}", **params), icon=":material/error:")
        st.caption(t("case.default_stands_in", model=model.name))
        return
    if model.spec is None:
        st.warning(t("case.headers_only", name=escape_markdown(model.name, 120), model=fallback.name),
                   icon=":material/info:")
    if upload:
        st.caption(t("case.upload_used", name=escape_markdown(upload, 80)))
