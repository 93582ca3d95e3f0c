"""Inputs and figures the fine-tuning chapter's calculators share (not a widget itself).

Options of bound inputs are the calculator's own names (mixed, adamw, lora...): they go into
the URL as they are, the same in both languages; the help text explains them."""

from __future__ import annotations

import streamlit as st

from calculator.models.seam import Model
from calculator.training import CHECKPOINTING, METHODS, OPTIMIZERS, PEAK_COMPONENTS, PRECISIONS, TrainingMemory
from guide.charts import stacked_memory
from guide.widgets import Context

# Components of a training step, in stacking order, with one colour each across the chapter.
COMPONENTS = PEAK_COMPONENTS
COLORS = {"weights": "#3366cc", "master": "#8fb0e6", "gradients": "#ff9900", "optimizer": "#dc3912",
          "activations": "#109618", "buffers": "#990099", "temporary": "#9aa5b1"}


def _select(ctx: Context, label: str, options, default, key: str, container) -> str:
    options = list(options)
    return container.selectbox(ctx.t(f"training.{label}"), options, index=options.index(default), key=key,
                               bind="query-params", help=ctx.t(f"training.{label}_help"))


def precision_picker(ctx: Context, key: str, default: str = "mixed", container=st) -> str:
    return _select(ctx, "precision", PRECISIONS, default, key, container)


def optimizer_picker(ctx: Context, key: str, default: str = "adamw", container=st) -> str:
    return _select(ctx, "optimizer", OPTIMIZERS, default, key, container)


def method_picker(ctx: Context, key: str, default: str = "full", container=st) -> str:
    return _select(ctx, "method", METHODS, default, key, container)


def checkpointing_picker(ctx: Context, key: str, default: str = "none", container=st) -> str:
    return _select(ctx, "checkpointing", CHECKPOINTING, default, key, container)


def number(ctx: Context, label: str, key: str, default: int, high: int, container=st, low: int = 1,
           step: int = 1) -> int:
    return int(container.number_input(ctx.t(f"training.{label}"), min_value=low, max_value=high, value=default,
                                      step=step, key=key, bind="query-params"))


def peak_parts(memories: list[TrainingMemory]) -> dict[str, list[int]]:
    """The engine's components at the peak (the master copy apart), one list per component
    with one value per bar."""
    components = [memory.peak_components() for memory in memories]
    return {name: [bars[name] for bars in components] for name in COMPONENTS}


def component_chart(ctx: Context, x: list, parts: dict[str, list[int]], x_title: str):
    """Stacked bars of the components, with the chapter's colours; empty components hidden."""
    shown = {name: values for name, values in parts.items() if any(values)}
    labels = {name: ctx.t(f"training.part_{name}") for name in shown}
    return stacked_memory(x, {labels[name]: values for name, values in shown.items()}, x_title,
                          ctx.t("common.memory_axis"), ctx.lang, colors={labels[name]: COLORS[name] for name in shown})


def moment_key(peak_moment: str) -> str:
    """The UI string that says a peak moment in words ("end of the forward (loss)":
    training.moment_end_of_the_forward_loss)."""
    return "training.moment_" + peak_moment.replace(" ", "_").replace("(", "").replace(")", "").replace("'", "")


def moment(ctx: Context, memory: TrainingMemory) -> str:
    """Where the peak comes, in words."""
    return ctx.t(moment_key(memory.peak_moment))


def softcap_caveat(ctx: Context, model: Model) -> None:
    """Softcapped models (Gemma 2) keep tensors the training model does not count yet; the
    accuracy harness measured their peak above the prediction, so the reader is told."""
    if model.spec.logit_softcap:
        st.warning(ctx.t("training.softcap_caveat"), icon=":material/warning:")

def tower_note(ctx: Context, model: Model, setup) -> None:
    """Fine-tuning a vision-language model on text: its image side is priced frozen
    (training.peak.tower_parameters), and LoRA's adapters on it with their weights only
    (training.idle_adapter_parameters); the reader is told, with the count."""
    from calculator.training import idle_adapter_parameters
    from calculator.training.peak import tower_parameters
    from guide.format import format_billions, format_count

    tower = tower_parameters(model.summary, model.spec)
    if setup.method == "full" and tower:
        st.info(ctx.t("training.tower_frozen", model=model.name, tower=format_billions(tower, ctx.lang)),
                icon=":material/info:")
    idle = idle_adapter_parameters(model.summary, model.spec, setup)
    if idle:
        st.info(ctx.t("training.tower_adapters", model=model.name, adapters=format_count(idle, ctx.lang)),
                icon=":material/info:")


def training_case(ctx: Context, keys: dict[str, str], **fixed):
    """The fine-tuning chapter's case (model, GPU, method, precision, optimizer, recomputation,
    micro-batch, sequence) with this calculator's own changes under `keys`, as inputs and the
    TrainingSetup they make; `fixed` sets fields this calculator compares (e.g. optimizer)."""
    from guide.inputs.common import case_inputs

    inputs = case_inputs(ctx, keys)
    return inputs, setup_of(inputs, **fixed)


def setup_of(inputs, **fixed):
    """The TrainingSetup a calculator runs from its inputs (pure: the parity test calls it)."""
    from calculator.training import TrainingSetup

    return TrainingSetup(**{"method": inputs.method, "precision": inputs.precision, "optimizer": inputs.optimizer,
                            "checkpointing": inputs.checkpointing, "micro_batch": inputs.batch,
                            "sequence": inputs.sequence, **fixed})


def positions_note(ctx: Context, model: Model, sequence: int) -> bool:
    """Refuse, in the reader's language, a sequence past the model's positions."""
    limit = model.spec.max_positions
    if limit and sequence > limit:
        st.error(ctx.t("error.context_too_long", tokens=sequence, limit=limit))
        return True
    return False


def train_answer(inputs, setup, answer, layout=None, methods=None, extra: tuple[str, ...] = ()):
    """The train command's answer for this step: its JSON (answers_training, as `train --json`
    writes it), the command line that reproduces it (`extra`: this calculator's own options)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.training_json import fewest_json, methods_json, train_json
    from calculator.training import Layout

    typed = inputs.model.key or inputs.model.name
    argv = (typed, "--gpu", inputs.card.key, "--method", setup.method, "--precision", setup.precision,
            "--optimizer", setup.optimizer, "--batch", str(setup.micro_batch), "--sequence", str(setup.sequence),
            "--checkpointing", setup.checkpointing, *extra)
    data = {**train_json(inputs.model, inputs.card, setup, layout or Layout(), answer),
            **fewest_json(inputs.model, inputs.card, setup)}
    if methods is not None:
        data.update(methods_json(methods))
    return answer_for("train", data, argv, typed)
