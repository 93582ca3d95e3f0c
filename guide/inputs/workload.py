"""The case's workload in the memory calculators (oom, quantization): the run one item makes
(calculator/memory/workloads.shape), and one line that says its lengths in the workload's unit."""

from __future__ import annotations

import streamlit as st

from calculator.memory.workloads import SPEECH_START_TOKENS, Shape, length_of, shape
from guide.format import format_count
from guide.widgets import Context


def work_of(inputs) -> Shape:
    """The run one item of the case's workload makes: the prompt is a forward pass's sequence
    and a seq2seq encoder's input, as in slow-model#batch-size."""
    return shape(inputs.model.spec, inputs.work, prompt=inputs.prompt, new_tokens=inputs.new_tokens,
                 sequence=inputs.prompt)


def workload_note(ctx: Context, work: Shape) -> None:
    """The workload's lengths in its own unit; nothing for a generation (the page's prose)."""
    if work.workload == "generation":
        return
    lang = ctx.lang
    st.info(ctx.t(f"workload_memory.{work.workload}", tokens=format_count(work.prompt, lang),
                  encoder=format_count(length_of(work), lang), new=format_count(work.new_tokens, lang),
                  start=SPEECH_START_TOKENS), icon=":material/category:")


def length_unit(ctx: Context, work: Shape) -> str:
    """What a length counts for this workload: frames, patches, encoder tokens or tokens."""
    return ctx.t(f"workload_memory.unit_{work.workload}")
