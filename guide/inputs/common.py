"""Inputs that many widgets share. Each is bound to the URL under the key it is given."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from calculator.models import catalog
from calculator.models.seam import Model, catalog_model
from calculator.core.budget import Budget
from calculator.core.cuda_context import context_for
from calculator.core.gpus import Gpu, gpu, gpus
from calculator.core.precision import DTYPES
from guide import url_values
from guide.case import WHOLE_NUMBERS
from guide.widgets import Context, gpu_name


def tokens_input(ctx: Context, label_key: str, key: str, default: int, low: int = 1, high: int = 1_048_576,
                 container=st, step: int = 128) -> int:
    return int(container.number_input(ctx.t(label_key), min_value=low, max_value=high, value=default, step=step,
                                      key=key, bind="query-params"))


# -- the page's case, and what one calculator changes of it --------------------------------

@dataclass(frozen=True)
class Inputs:
    """What a calculator runs on: the chapter's case, with this calculator's own changes."""

    model: Model
    card: Gpu
    dtype: str
    batch: int
    prompt: int
    new_tokens: int
    sequence: int
    method: str
    precision: str
    optimizer: str
    checkpointing: str
    changed: tuple[str, ...] = ()  # the fields this calculator changed
    failed: tuple[str, ...] = ()  # the fields this calculator was given but could not use (a Hub id offline)
    workload: str = "auto"  # the case's workload ("auto": the model's own)
    items: int = 100_000  # how many items the reader's job has

    @property
    def work(self) -> str:
        """The workload this calculator runs (calculator/memory/workloads.py: workload_for)."""
        from calculator.memory.workloads import workload_for

        return workload_for(self.model.spec, None if self.workload == "auto" else self.workload)

    @property
    def context(self) -> int:
        return self.prompt + self.new_tokens


OVERRIDE_NUMBERS = WHOLE_NUMBERS  # a calculator's own override takes what the case bar takes


def case_inputs(ctx: Context, keys: dict[str, str], dtypes=None, legacy: dict[str, str] | None = None,
                headers: bool = False) -> Inputs:
    """The page's case, and an expander where the reader may change some of it for this
    calculator only. `keys` maps case fields to this calculator's URL keys ({"gpu": "cm_gpu"});
    a key left empty follows the page's case. `dtypes`: the precisions this calculator offers.
    `legacy`: older URL keys still read for a field (links pasted before the case existed).
    `headers`: a counting calculator, which takes a checkpoint only its safetensors headers count."""
    base = _base_inputs(ctx)
    present = [key for key in keys.values() if st.query_params.get_all(key)]
    values, changed = {}, []
    panel = own_case_key(keys.values())
    _open_for_a_link(panel, bool(present))
    local = st.expander(ctx.t("case.local"), icon=":material/tune:", key=panel, on_change="rerun")
    # Its inputs are drawn only while it is open or the link gave it a value (a refused one too,
    # so the frame can say so; url_values.sent holds both): closed, they were a sixth of a
    # chapter's elements, sent and drawn again on every case change (measured with bench/case_change_browser.py).
    if local.open or any(url_values.sent(key) for key in (*keys.values(), *(legacy or {}).values())):
        with local:
            st.caption(ctx.t("case.local_help"))
            columns = st.columns(min(len(keys), 4) or 1)
            for index, (name, key) in enumerate(keys.items()):
                field_name = "card" if name == "gpu" else name
                with columns[index % len(columns)]:
                    value = _override(ctx, name, key, getattr(base, field_name), dtypes)
                if value is not None:
                    values[field_name], changed = value, changed + [name]
    for name, key in (legacy or {}).items():
        old = st.query_params.get_all(key)
        if name not in values and old and old[-1].strip():
            values[name], changed = old[-1].strip(), changed + [name]
    failed = ()
    if "model" in values:
        values["model"] = _local_model(ctx, values["model"], base.model, headers)
        if values["model"] is base.model:
            changed.remove("model")
            del values["model"]
            failed = ("model",)
    return replace(base, **values, changed=tuple(changed), failed=failed)


def own_case_key(keys) -> str:
    """The key of a calculator's own-case panel, from its URL keys in order (its open state is
    st.session_state[this])."""
    return "local-" + "-".join(keys)


def _open_for_a_link(panel: str, present: bool) -> None:
    """Open a calculator's own-case panel the first time the address gives it a value. Through
    its state, not `expanded=`: Streamlit hashes the expander's id from `expanded`, so a panel
    whose `expanded` followed the address became a new element when the reader typed its
    first value (the field they were typing in drawn anew) and closed when they emptied it."""
    opened = st.session_state.setdefault("local_panels_opened", set())
    if present and panel not in opened:
        opened.add(panel)
        st.session_state[panel] = True


def _base_inputs(ctx: Context) -> Inputs:
    from guide.case import Case

    case = ctx.case
    raw = case.case if case is not None else Case()
    model = case.model if case is not None else catalog_model(catalog.find(raw.model).key)
    return Inputs(model, gpu(raw.gpu), raw.dtype, raw.batch, raw.prompt, raw.new_tokens, raw.sequence,
                  raw.method, raw.precision, raw.optimizer, raw.checkpointing, workload=raw.workload, items=raw.items)


def _override(ctx: Context, name: str, key: str, current, dtypes):
    """One input that is empty (the page's case) unless the reader or the link sets it."""
    same = ctx.t("case.same_as_page")
    if name == "model":
        ids = [entry.id for entry in catalog.entries()]
        return st.selectbox(ctx.t("common.model"), ids, index=None, key=key, bind="query-params",
                            accept_new_options=True, placeholder=f"{same} {current.name}",
                            help=ctx.t("case.local_model_help"))
    if name == "gpu":
        cards = gpus()
        choice = st.selectbox(ctx.t("common.gpu"), list(cards), index=None, key=key, format_func=gpu_name,
                              bind="query-params", placeholder=f"{same} {current.name}", help=ctx.t("common.gpu_help"))
        return cards[choice] if choice is not None else None
    if name == "dtype":
        options = list(dtypes or DTYPES)
        return st.selectbox(ctx.t("common.dtype"), options, index=None, key=key, bind="query-params",
                            placeholder=f"{same} {current}", help=ctx.t("common.dtype_help"))
    if name in OVERRIDE_NUMBERS:
        value = st.number_input(ctx.t(f"case.{name}"), min_value=1, max_value=OVERRIDE_NUMBERS[name], value=None,
                                step=1, key=key, bind="query-params", placeholder=f"{same} {current}")
        return int(value) if value is not None else None
    from guide.case import CHOICES

    def label(value, n=name):  # the URL keeps the stable value; the reader sees it in their language
        return f"{same} {ctx.t(f'case.{n}_{current}')}" if value is None else ctx.t(f"case.{n}_{value}")

    return url_choice(ctx, ctx.t(f"case.{name}"), key, [None, *CHOICES[name]], label, default=None)


def _local_model(ctx: Context, name: str, fallback: Model, headers: bool = False) -> Model:
    """A model this calculator alone uses: a catalog model or a Hub id, through the model seam."""
    from calculator.core.errors import CalculatorError
    from calculator.models.seam import resolve
    from guide.format import escape_markdown

    try:
        model = resolve(name, hub_id=catalog.find(name) is None, read_headers=headers,
                        progress=lambda step, repo: st.spinner(ctx.t(f"model_source.{step}", name=escape_markdown(repo),
                                                                     repo=escape_markdown(repo)), show_time=True))
    except CalculatorError as error:
        params = {k: escape_markdown(v, 160) for k, v in error.shown_params(ctx.lang).items()}
        st.error(ctx.t(f"error.{error.code}", **params), icon=":material/error:")
        return fallback
    if model.spec is None and not headers:  # only its safetensors headers count it: a calculator needs its shape
        st.error(ctx.t("case.headers_only", name=escape_markdown(model.name, 120), model=fallback.name))
        return fallback
    return model


def readings_row(ctx: Context, readings, card: Gpu | None) -> None:
    """A peak read three ways, side by side, with the memory the process can use; the
    meaning of each is explained once, in memory-estimate#units."""
    from guide.format import format_bytes

    lang = ctx.lang
    columns = st.columns(4 if card is not None else 3)
    columns[0].metric(ctx.t("readings.allocated"), format_bytes(readings.allocated_bytes, lang),
                      help=ctx.t("readings.allocated_help"))
    columns[1].metric(ctx.t("readings.reserved"), format_bytes(readings.reserved_bytes, lang),
                      help=ctx.t("readings.reserved_help"))
    columns[2].metric(ctx.t("readings.nvidia_smi"), format_bytes(readings.nvidia_smi_bytes, lang),
                      help=ctx.t("readings.nvidia_smi_help"))
    if card is not None:
        columns[3].metric(ctx.t("readings.usable"), format_bytes(readings.usable_bytes, lang),
                          help=ctx.t("readings.usable_help", gpu=card.name, total=format_bytes(card.total_bytes, lang),
                                     context=format_bytes(card.context_bytes, lang),
                                     headroom=format_bytes(readings.headroom_bytes, lang),
                                     spread=format_bytes(Budget(card).context_spread_bytes, lang),
                                     basis=ctx.t(f"readings.context_{context_for(card.architecture).source}")))
    st.caption(ctx.t("readings.explain"))


def tight(budget):
    """The same card without its headroom: what fits only there is "tight"."""
    return replace(budget, headroom_share=0.0)


def counted_model(ctx: Context, inputs: Inputs) -> Model | None:
    """The model a counting calculator shows: the calculator's own, else the case's, including
    a checkpoint only its safetensors headers could count (the estimator and exact count show
    it). None when the reader's model could not be read: the bar says why, and a table of the
    default model would pass for theirs."""
    case = ctx.case
    if "model" in inputs.changed or case is None:
        return inputs.model
    if case.model_error is not None:
        return None
    return case.headers_model or inputs.model


def url_choice(ctx: Context, label: str, key: str, options, labels, default=None, container=st,
               help: str | None = None):
    """A choice shown with labels in the reader's language whose URL keeps the stable value
    (generate, loglikelihood, mixed...): Streamlit's bound selectbox would put the label in the
    URL, so this one mirrors the URL by hand and writes the value back when it changes. A URL
    value that is not an option leaves the default (the frame says the link's value was not used)."""
    options = list(options)
    default = options[0] if default is None and None not in options else default
    raw = st.query_params.get_all(key)
    st.session_state[key] = raw[-1] if raw and raw[-1] in options else default
    return container.selectbox(label, options, key=key, format_func=labels, on_change=_write_choice,
                               args=(key, default), help=help)


def _write_choice(key: str, default) -> None:
    value = st.session_state.get(key)
    if value == default:
        if key in st.query_params:
            del st.query_params[key]
    else:
        st.query_params[key] = str(value)


def source_label(ctx: Context, counted: Model) -> str:
    """One line saying which model the figures are for and where they come from (catalog, Hub,
    upload, safetensors headers)."""
    from guide.format import escape_markdown

    return ctx.t(f"model_source.counted_{counted.source}", name=escape_markdown(counted.name))
