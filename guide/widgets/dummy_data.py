"""oom#dummy-data-test: a ready-to-run script that tries the worst case first (the longest
context, the full batch, dummy tokens) and prints the peak beside the calculator's."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget, readings_of
from calculator.memory.inference import inference_memory
from calculator.memory.snippets import SNIPPET_DTYPES, dummy_data_snippet
from calculator.memory.workloads import length_of, varies
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget
from guide.inputs.common import case_inputs, readings_row
from guide.inputs.inference import attention_picker, mode_picker
from guide.inputs.workload import length_unit, work_of, workload_note



def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "dd_model", "batch": "dd_batch", "prompt": "dd_context", "dtype": "dd_dtype"},
                         dtypes=SNIPPET_DTYPES)
    model, batch, context = inputs.model, inputs.batch, inputs.context if "prompt" not in inputs.changed else inputs.prompt
    dtype = inputs.dtype if inputs.dtype in SNIPPET_DTYPES else "bfloat16"
    c5, c6 = st.columns(2)
    attention = attention_picker(ctx, "dd_attention", container=c5)
    mode = mode_picker(ctx, "dd_mode", model.spec, container=c6)
    spec, summary = model.spec, model.summary
    work = work_of(inputs)
    if not varies(work):  # one window, one image: the first batch is the worst
        workload_note(ctx, work)
        memory = inference_memory(summary, spec, batch, dtype=dtype, **work.memory_lengths)
        readings_row(ctx, readings_of(memory, Budget(inputs.card)), inputs.card)
        st.info(ctx.t("workload_memory.fixed_dummy", length=format_count(length_of(work), lang),
                      unit=length_unit(ctx, work), total=format_bytes(memory.total_bytes, lang)))
        return
    if spec.kind == "vision":
        st.info(ctx.t("dummy_data.vision"))
        return
    if spec.max_positions and context > spec.max_positions:
        st.warning(ctx.t("dummy_data.beyond_window", context=format_count(context, lang),
                         window=format_count(spec.max_positions, lang)))
        context = spec.max_positions
    memory = inference_memory(summary, spec, batch, context, dtype, attention=attention, mode=mode)
    readings_row(ctx, readings_of(memory, Budget(inputs.card)), inputs.card)
    code = dummy_data_snippet(model.name, summary.architecture, spec.kind, batch, context, dtype,
                              memory.attn_implementation, mode, memory.total_bytes, lang)
    st.code(code, language="python")
    st.caption(ctx.t("dummy_data.caption"))


WIDGET = Widget(
    name="dummy-data",
    render=render,
    params=(Param("dd_model", "mistralai/Mistral-7B-v0.1", "choice"), Param("dd_batch", "32", "int"), Param("dd_context", "16384", "int"),
            Param("dd_dtype", "float16", "choice"), Param("dd_attention", "eager", "choice"), Param("dd_mode", "loglikelihood", "choice")),
)
