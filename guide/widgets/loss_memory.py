"""fine-tuning#large-vocabulary: the loss as transformers' Trainer computes it (float32 logits),
chunked (torchtune) or fused with the output head (trl's SFTTrainer, Liger), for the reader's
step: what the loss holds, the peak and the largest micro-batch of each."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.training import LOSSES, activation_model
from calculator.answers.verdicts import largest_micro_batch_answer
from guide.format import format_bytes
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import url_choice
from guide.inputs.training import moment, positions_note, train_answer, training_case


def answers_for(inputs, setup) -> dict:
    """The engine's answer for each loss, the rest of the step unchanged, or its refusal (a loss
    that cannot run this setup: trl's fused head with an adapter on the head) (pure: no Streamlit)."""
    answers = {}
    for loss in LOSSES:
        try:
            answers[loss] = largest_micro_batch_answer(inputs.model, inputs.card, replace(setup, loss=loss))
        except CalculatorError as error:
            answers[loss] = error
    return answers


def loss_held(inputs, setup) -> int:
    """What the loss holds at the start of the backward (the engine's figure)."""
    model = inputs.model
    return activation_model(model.summary, model.spec, model.traits, setup).loss_held


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2 = st.columns([1, 2])
    picked = url_choice(ctx, ctx.t("loss_memory.loss"), "lv_loss", LOSSES, lambda loss: ctx.t(f"loss_memory.loss_{loss}"),
                        help=ctx.t("loss_memory.loss_help"), container=c1)
    targets = c2.text_input(ctx.t("training.lora_targets"), value="all-linear", max_chars=300, key="lv_targets",
                            bind="query-params", help=ctx.t("training.lora_targets_help"))
    inputs, setup = training_case(ctx, {"model": "lv_model", "gpu": "lv_gpu", "method": "lv_method",
                                        "batch": "lv_batch", "sequence": "lv_sequence"}, loss=picked,
                                  lora_targets=targets)
    if positions_note(ctx, inputs.model, setup.sequence):
        return
    answers = answers_for(inputs, setup)
    if isinstance(answers[picked], CalculatorError):
        show_error(ctx, answers[picked])
        return
    answers = {loss: answer for loss, answer in answers.items() if not isinstance(answer, CalculatorError)}
    held = {loss: loss_held(inputs, replace(setup, loss=loss)) for loss in answers}
    chosen = answers[picked].detail
    m1, m2 = st.columns(2)
    m1.metric(ctx.t("loss_memory.held"), format_bytes(held[picked], lang))
    m2.metric(ctx.t("training.column_peak"), format_bytes(chosen.total_bytes, lang))
    rows = [{ctx.t("loss_memory.col_loss"): ctx.t(f"loss_memory.loss_{loss}"),
             ctx.t("loss_memory.held"): format_bytes(held[loss], lang),
             ctx.t("training.column_peak"): format_bytes(answers[loss].detail.total_bytes, lang),
             ctx.t("lora.col_largest"): answers[loss].figures["largest_micro_batch"]} for loss in answers]
    st.dataframe(rows, hide_index=True)
    st.caption(ctx.t("loss_memory.caption", moment=moment(ctx, chosen), gpu=inputs.card.name))
    targets_flag = () if setup.method == "full" or targets == "all-linear" else ("--lora-targets", targets)
    answer_with(ctx, train_answer(inputs, setup, answers[picked], extra=("--loss", picked, *targets_flag)))


WIDGET = Widget(
    name="loss-memory",
    render=render,
    params=(Param("lv_loss", "fused", "choice"), Param("lv_model", "Qwen/Qwen2.5-7B", "choice"),
            gpu_param("lv_gpu", "NVIDIA H100 SXM"), Param("lv_method", "qlora", "choice"),
            Param("lv_targets", "q_proj,v_proj", "text"),
            Param("lv_batch", "8", "int"), Param("lv_sequence", "4096", "int")),
)
