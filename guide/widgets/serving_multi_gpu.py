"""serving#multi-gpu-inference: transformers without a serving engine over several GPUs:
device_map="auto" (whole layers on successive GPUs, one at work at a time) against a
tensor-parallel plan (every matrix split, all at work): the fullest GPU of each, and the code."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.serving.launch import transformers_code
from calculator.serving.engines import MAX_TOKENS
from calculator.serving.plan import transformers_multi_gpu
from calculator.serving.transformers_formats import multi_gpu_dtype
from guide.format import format_bytes
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs
from guide.inputs.serving import case_count, serving_case

GPU_COUNTS = (2, 4, 8)
FLOATS = ("float32", "float16", "bfloat16")
CHOICES = (*FLOATS, "mxfp4", "nvfp4", "fp8-block128", "bnb-int8", "bnb-nf4")  # formats transformers' quantizers load


def paste_answer(model, card, gpus: int, dtype: str, batch: int, context: int):
    """`multi-gpu --markdown`'s answer for this case (its JSON, built as the command builds it)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.offload_multi import multi_gpu_json

    typed = model.key or model.name
    argv = (typed, "--gpu", card.key, "--gpus", str(gpus), "--dtype", dtype, "--batch", str(batch),
            "--context", str(context))
    return answer_for("multi-gpu", multi_gpu_json(model, card, gpus, dtype, batch, context), argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "svt_model", "gpu": "svt_gpu", "dtype": "svt_dtype"}, dtypes=CHOICES)
    model, gpu, dtype = inputs.model, inputs.card, inputs.dtype
    try:
        multi_gpu_dtype(dtype)
    except CalculatorError:  # int4, GGUF...: `multi-gpu` refuses them; the page says so and prices bfloat16
        st.caption(ctx.t("serving.multi_dtype", dtype=dtype))
        dtype = "bfloat16"
    c3, c5, c6 = st.columns(3)
    users, case_context, tensor = serving_case(ctx)
    # the case's tensor-parallel size is the GPUs of one copy; one GPU is not this section's question
    gpus = c3.selectbox(ctx.t("serving.gpus"), list(GPU_COUNTS), index=GPU_COUNTS.index(tensor if tensor in GPU_COUNTS
                                                                                       else 4),
                        key="svt_gpus", bind="query-params")
    batch = case_count(ctx, "oom.batch", "svt_batch", min(users, 4096), high=4096, container=c5)
    context = case_count(ctx, "serving.context", "svt_context", case_context, high=MAX_TOKENS, step=128, container=c6)
    try:
        result = transformers_multi_gpu(model, gpu, gpus, dtype, batch, context)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    worst = max(range(len(result.device_map_weights)),
                key=lambda i: result.device_map_weights[i] + result.device_map_cache[i])
    verdict = {"fits": "serving.verdict_fits", "tight": "serving.verdict_tight", "too_big": "serving.verdict_too_big"}
    rows = [{
        ctx.t("serving.col_plan"): "device_map=\"auto\"",
        ctx.t("serving.col_weights"): format_bytes(result.device_map_weights[worst], lang),
        ctx.t("serving.col_cache"): format_bytes(result.device_map_cache[worst], lang),
        ctx.t("serving.col_activations"): format_bytes(result.activation_bytes, lang),
        ctx.t("serving.col_peak"): format_bytes(result.device_map_peak_bytes, lang),
        ctx.t("serving.col_verdict"): ctx.t(verdict[result.device_map_verdict]),
        ctx.t("serving.col_busy"): "1",
    }]
    if result.tp_weights_bytes is not None:
        rows.append({
            ctx.t("serving.col_plan"): f"DistributedConfig(tp_size={gpus})",
            ctx.t("serving.col_weights"): format_bytes(result.tp_weights_bytes, lang),
            ctx.t("serving.col_cache"): format_bytes(result.tp_cache_bytes, lang),
            ctx.t("serving.col_activations"): format_bytes(result.activation_bytes, lang),
            ctx.t("serving.col_peak"): format_bytes(result.tp_peak_bytes, lang),
            ctx.t("serving.col_verdict"): ctx.t(verdict[result.tp_verdict]),
            ctx.t("serving.col_busy"): str(gpus),
        })
    st.dataframe(rows, hide_index=True)
    if result.weights_source == "dequantized":
        st.info(ctx.t("serving.multi_dequantized", gpu=gpu.name), icon=":material/info:")
    if result.no_tensor_parallel == "format":
        st.info(ctx.t("serving.multi_format", fmt=result.weights_dtype), icon=":material/info:")
    elif result.tp_weights_bytes is None:
        st.warning(ctx.t("serving.tp_heads", gpus=gpus, heads=model.spec.heads))
    elif result.device_map_verdict == "too_big" and result.tp_verdict == "too_big":
        st.error(ctx.t("serving.multi_too_big", gpus=gpus, gpu=gpu.name))
    else:
        st.info(ctx.t("serving.multi_summary", gpus=gpus, gpu=gpu.name))
    code_dtype = dtype if dtype in FLOATS else "bfloat16"  # a pre-quantized checkpoint: its compute dtype
    st.code(transformers_code(model.load_id, gpus, code_dtype, "device_map"), language="python", wrap_lines=True)
    if result.tp_weights_bytes is not None:
        st.code(transformers_code(model.load_id, gpus, code_dtype, "tp"), language="python", wrap_lines=True)
    st.caption(ctx.t("serving.multi_caption"))
    answer_with(ctx, paste_answer(model, gpu, gpus, dtype, batch, context))


WIDGET = Widget(
    name="serving-multi-gpu",
    render=render,
    params=(Param("svt_model", "Qwen/Qwen2.5-7B", "choice"), gpu_param("svt_gpu", "NVIDIA L4"), Param("svt_gpus", "2", "int"),
            Param("svt_dtype", "float16", "choice"), Param("svt_batch", "8", "int"), Param("svt_context", "16384", "int")),
)
