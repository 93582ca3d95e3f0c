"""slow-model#data-parallelism: time to process N samples on k GPUs, one node or several."""

from __future__ import annotations

import streamlit as st

from calculator.core.limits import high
from calculator.memory.speed import NETWORKS_GBS
from calculator.answers.verdicts import card_chose_float16, data_parallel_answer
from calculator.memory.workloads import shape
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, tokens_input



def duration(seconds: float, ctx: Context) -> str:
    if seconds < 120:
        return ctx.t("common.seconds", n=format_number(seconds, 1, ctx.lang))
    if seconds < 7200:
        return ctx.t("common.minutes", n=format_number(seconds / 60, 1, ctx.lang))
    return ctx.t("common.hours", n=format_number(seconds / 3600, 1, ctx.lang))


def answer_for(inputs, samples: int, per_node: int, nodes: int, network: str, training: bool, counts=()):
    """The page's request to the engine (pure: the parity test calls it without Streamlit), in
    the case's workload (a forward pass, an encoder-decoder's answer, a 30 s window, an image
    divide their items over the GPUs)."""
    work = shape(inputs.model.spec, inputs.work, prompt=inputs.prompt, new_tokens=inputs.new_tokens,
                 sequence=inputs.prompt)
    return data_parallel_answer(inputs.model, inputs.card, samples, inputs.prompt, per_node, nodes, network, training,
                                inputs.dtype, counts, work=work)


def paste_answer(inputs, answer, samples: int, per_node: int, network: str, training: bool):
    """The data-parallel command's answer for this calculation (its JSON, as `--json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.parallel_json import data_parallel_json

    typed, nodes = inputs.model.key or inputs.model.name, answer.figures["nodes"]
    argv = [typed, "--gpu", inputs.card.key, "--samples", str(samples), "--tokens", str(inputs.prompt),
            "--gpus-per-node", str(per_node), "--nodes", str(nodes), "--network", network,
            "--dtype", inputs.dtype] + (["--training"] if training else [])
    data = data_parallel_json(inputs.model, inputs.card, answer, samples, inputs.prompt, per_node, network)
    return answer_of("data-parallel", data, tuple(argv), typed)


def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "dp_model", "gpu": "dp_gpu", "prompt": "dp_tokens"})
    gpu = inputs.card
    training = st.checkbox(ctx.t("data_parallel.training"), value=False, key="dp_train", bind="query-params")
    samples = tokens_input(ctx, "data_parallel.samples", "dp_samples", 100_000, high=high("samples"), step=1000)
    c5, c6, c7 = st.columns(3)
    per_node = tokens_input(ctx, "data_parallel.per_node", "dp_per_node", 8, high=high("gpus_per_node"), container=c5,
                            step=1)
    nodes = tokens_input(ctx, "data_parallel.nodes", "dp_nodes", 1, high=high("nodes"), container=c6, step=1)
    network = c7.selectbox(ctx.t("data_parallel.network"), list(NETWORKS_GBS), key="dp_network",
                           bind="query-params", disabled=nodes == 1)
    counts = sorted({1, 2, 4, 8, per_node} & set(range(1, per_node + 1)))
    labels = counts + [per_node * n for n in sorted({1, 2, 4, nodes})][1:]
    answer = answer_for(inputs, samples, per_node, nodes, network, training, labels)
    figures = answer.figures
    answer_with(ctx, paste_answer(inputs, answer, samples, per_node, network, training))
    times = [figures["seconds_by_gpus"][k] for k in labels]
    single, final = figures["one_gpu_seconds"], figures["seconds"]
    if training:
        detail = ctx.t("data_parallel.training_detail", comm=format_number(figures["communication_seconds"] * 1000, 1, ctx.lang),
                       compute=format_number(figures["compute_seconds"] * 1000, 1, ctx.lang))
    else:
        detail = ctx.t("data_parallel.inference_detail", batch=figures["batch"])
    if card_chose_float16(answer.assumed("compute_dtype")):
        detail += " " + ctx.t("data_parallel.float16_note", gpu=gpu.name)
    k = per_node * nodes
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("data_parallel.one_gpu"), duration(single, ctx))
    m2.metric(ctx.t("data_parallel.k_gpus", k=k), duration(final, ctx))
    m3.metric(ctx.t("data_parallel.speedup"), f"×{format_number(single / final, 1, ctx.lang)}")
    st.caption(detail)
    fig = Drawing().add_scatter(x=labels, y=[single / t for t in times], mode="lines+markers",
                                name=ctx.t("data_parallel.speedup"))
    fig.add_scatter(x=labels, y=labels, mode="lines", line_dash="dot", name=ctx.t("data_parallel.ideal"))
    base_layout(fig, ctx.t("data_parallel.x_axis"), ctx.t("data_parallel.speedup"), ctx.lang, height=320)
    show_chart(fig, key="dp_chart")


WIDGET = Widget(
    name="data-parallel",
    render=render,
    params=(Param("dp_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("dp_gpu", "NVIDIA H100 SXM"),
            Param("dp_train", "true", "bool"), Param("dp_samples", "5000", "int"), Param("dp_tokens", "2048", "int"),
            Param("dp_per_node", "4", "int"), Param("dp_nodes", "4", "int"),
            Param("dp_network", "Ethernet 25 Gb/s", "choice", given=(("dp_train", "true"), ("dp_nodes", "4")))),
)
