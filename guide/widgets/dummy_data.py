"""oom#dummy-data-test: a ready-to-run script that tries the worst case first (the longest
context, the full batch, dummy tokens) and prints the peak beside the calculator's."""

from __future__ import annotations

import streamlit as st

from calculator.inference import inference_memory
from calculator.snippets import SNIPPET_DTYPES, dummy_data_snippet
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import dtype_picker, model_picker, tokens_input
from guide.widgets.inference_inputs import attention_picker, mode_picker

KEYS = ("dd_model", "dd_batch", "dd_context", "dd_dtype", "dd_attention", "dd_mode")


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2, c3 = st.columns(3)
    model = model_picker(ctx, "dd_model", default="llama-3.1-8b", container=c1)
    batch = tokens_input(ctx, "oom.batch", "dd_batch", 8, high=4096, container=c2, step=1)
    context = tokens_input(ctx, "dummy_data.context", "dd_context", 4096, container=c3)
    c4, c5, c6 = st.columns(3)
    dtype = dtype_picker(ctx, "dd_dtype", container=c4, options=SNIPPET_DTYPES)
    attention = attention_picker(ctx, "dd_attention", container=c5)
    mode = mode_picker(ctx, "dd_mode", container=c6)
    spec, summary = model.spec, model.summary
    if spec.kind == "vision":
        st.info(ctx.t("dummy_data.vision"))
        share_box(ctx, KEYS)
        return
    if spec.max_positions and context > spec.max_positions:
        st.warning(ctx.t("dummy_data.beyond_window", context=format_count(context, lang),
                         window=format_count(spec.max_positions, lang)))
    memory = inference_memory(summary, spec, batch, context, dtype, attention=attention, mode=mode)
    st.metric(ctx.t("dummy_data.predicted"), format_bytes(memory.total_bytes, lang))
    code = dummy_data_snippet(model.name, summary.architecture, spec.kind, batch, context, dtype,
                              memory.attention_used, mode, memory.total_bytes, lang)
    st.code(code, language="python")
    st.caption(ctx.t("dummy_data.caption"))
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="dummy-data",
    render=render,
    params=(Param("dd_model", "mistralai/Mistral-7B-v0.1"), Param("dd_batch", "32"), Param("dd_context", "16384"),
            Param("dd_dtype", "float16"), Param("dd_attention", "eager"), Param("dd_mode", "loglikelihood")),
)
