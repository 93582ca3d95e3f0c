"""serving#engine-settings: the flags that change memory, engine by engine: what they leave for
the KV cache and how many sequences of the context it holds (vLLM, SGLang), or the KV buffer
llama-server allocates (-c, -np, -ngl, cache types); and the command line to paste."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.core.limits import high
from calculator.serving.launch import llamacpp_command, sglang_command, vllm_command
from calculator.distributed.llama_cpp import bytes_per_value
from calculator.serving.engines import MAX_TOKENS
from calculator.serving.plan import llamacpp_cache, serve
from guide.format import format_bytes, format_count, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs
from guide.inputs.serving import (asked_dtype, case_count, count_input, dtype_args, engine_picker, kv_picker,
                                  limit_input, serving_case, share_input, engine_note)

ENGINES = ("vllm", "sglang", "llama.cpp")
CACHE_TYPES = ("f16", "q8_0", "q4_0")


def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "sve_model", "gpu": "sve_gpu"})
    model, gpu = inputs.model, inputs.card
    c1, c4 = st.columns(2)
    engine = engine_picker(ctx, "sve_engine", container=c1, choices=ENGINES)
    users, case_context, tensor = serving_case(ctx)
    context = case_count(ctx, "serving.max_model_len", "sve_context", case_context, high=MAX_TOKENS, step=128,
                         container=c4)
    server = engine != "llama.cpp"
    st.caption(ctx.t("serving.settings_engine_flags"))
    c5, c6, c7, c8, c9 = st.columns(5)
    kv_dtype = kv_picker(ctx, "sve_kv", container=c5)
    utilization = share_input(ctx, "sve_util", container=c6)
    seqs = limit_input(ctx, "serving.max_num_seqs", "sve_seqs", 1, high("max_num_seqs"), container=c7,
                       help_key="serving.max_num_seqs_help")
    batched = limit_input(ctx, "serving.batched_tokens", "sve_batched", 16, 131_072, step=1024, container=c8,
                          help_key="serving.batched_tokens_help")
    offload = float(c9.number_input(ctx.t("serving.cpu_offload"), min_value=0.0, max_value=1024.0, value=0.0,
                                    step=1.0, key="sve_offload", bind="query-params",
                                    help=ctx.t("serving.cpu_offload_help")))
    st.caption(ctx.t("serving.settings_llamacpp_flags"))
    d1, d2, d3 = st.columns(3)
    slots = count_input(ctx, "serving.slots", "sve_slots", 4, high=256, container=d1, help_key="serving.slots_help")
    ngl = count_input(ctx, "serving.gpu_layers", "sve_ngl", 99, low=0, high=999, container=d2,
                      help_key="serving.gpu_layers_help")
    cache_type = d3.selectbox(ctx.t("serving.cache_type"), list(CACHE_TYPES), key="sve_cache", bind="query-params",
                              help=ctx.t("serving.cache_type_help"))
    try:
        if server:
            _engine(ctx, engine, model, gpu, asked_dtype(ctx, inputs), context, kv_dtype, utilization, seqs, batched, offload,
                    tensor, users)
        else:
            _llamacpp(ctx, model, context, slots, ngl, cache_type)
    except CalculatorError as error:
        show_error(ctx, error)


def _engine(ctx, engine, model, gpu, dtype, context, kv_dtype, utilization, seqs, batched, offload, tensor,
            users) -> None:
    lang = ctx.lang
    plan = serve(model, gpu, engine=engine, dtype=dtype, kv_dtype=kv_dtype, context=context, utilization=utilization,
                 max_num_seqs=seqs, max_num_batched_tokens=batched, cpu_offload_gib=offload, tensor=tensor,
                 users=users)  # with the layouts: the answer names the fewest GPUs when these do not serve
    engine_note(ctx, engine, plan)
    r = plan.replica
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("serving.part_weights"), format_bytes(r.weights_bytes_per_gpu, lang))
    m2.metric(ctx.t("serving.metric_reserve"), format_bytes(r.activation_reserve_bytes, lang))
    m3.metric(ctx.t("serving.metric_pool"), format_bytes(r.kv_pool_bytes_per_gpu, lang))
    m4.metric(ctx.t("serving.metric_sequences"), format_count(r.sequences, lang))
    st.caption(ctx.t("serving.limits_used", seqs=format_count(plan.max_num_seqs, lang),
                     tokens=format_count(plan.max_num_batched_tokens, lang), gpu=gpu.name))
    if r.sequences:
        st.success(ctx.t("serving.sequences_fit", n=format_count(r.sequences, lang), tokens=format_count(context, lang),
                         gpu=gpu.name, pool=format_count(r.kv_tokens, lang), concurrency=f"{r.max_concurrency:.2f}", log_tokens=f"{context:,}"))
    else:
        st.error(ctx.t("serving.none_fits", tokens=format_count(context, lang), gpu=gpu.name,
                       pool=format_count(r.kv_tokens, lang)))
    if engine == "vllm":
        command = vllm_command(model.load_id, tensor=tensor, dtype=plan.dtype, kv_dtype=kv_dtype, context=context,
                               utilization=utilization,
                               max_num_seqs=plan.max_num_seqs, max_num_batched_tokens=plan.max_num_batched_tokens,
                               cpu_offload_gib=offload)
    else:
        command = sglang_command(model.load_id, tensor=tensor, dtype=plan.dtype, kv_dtype=kv_dtype, context=context, fraction=utilization,
                                 max_running_requests=plan.max_num_seqs, chunked_prefill=plan.max_num_batched_tokens)
        if offload:
            command += f" --cpu-offload-gb {offload:g}"
        st.caption(ctx.t("serving.sglang_settings_caption"))
    st.code(command, language="bash", wrap_lines=True)
    answer_with(ctx, paste_answer(model, plan, tensor, utilization, seqs, batched, offload))


def paste_answer(model, plan, tensor: int, utilization, seqs, batched, offload: float):
    """`serve`'s answer with the engine flags the reader set (an empty one is the engine's default)."""
    from calculator.answers.markdown import answer_for
    from calculator.answers.serving_json import serve_json

    typed = model.key or model.name
    flags = {"--gpu-memory-utilization": utilization, "--max-num-seqs": seqs, "--max-num-batched-tokens": batched,
             "--cpu-offload-gb": offload or None}
    argv = (typed, "--gpu", plan.gpu, "--engine", plan.engine, *dtype_args(plan), "--kv-dtype", plan.kv_dtype,
            "--context", str(plan.context), "--users", str(plan.users), "--tensor", str(tensor),
            *(item for flag, value in flags.items() if value is not None for item in (flag, f"{value:g}")))
    return answer_for("serve", serve_json(model, plan), argv, typed)


def _llamacpp(ctx, model, context, slots, ngl, cache_type) -> None:
    lang = ctx.lang
    cache = llamacpp_cache(model.spec, context, slots, cache_type, cache_type, gpu_layers=ngl, config=model.config)
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("serving.llamacpp_gpu"), format_bytes(cache.gpu_bytes, lang))
    m2.metric(ctx.t("serving.llamacpp_host"), format_bytes(cache.host_bytes, lang))
    m3.metric(ctx.t("serving.llamacpp_slot"), format_count(cache.tokens_per_slot, lang))
    st.info(ctx.t("serving.llamacpp_summary", n_ctx=format_count(cache.n_ctx, lang), slots=slots,
                  layers=cache.layers_on_gpu, bytes=format_number(bytes_per_value(cache_type), 4, lang)))
    st.code(llamacpp_command(f"{model.load_id.split('/')[-1]}.gguf", context=context, slots=slots, gpu_layers=ngl,
                             cache_type_k=cache_type, cache_type_v=cache_type), language="bash", wrap_lines=True)


WIDGET = Widget(
    name="serving-settings",
    render=render,
    params=(Param("sve_engine", "llama.cpp", "choice"), Param("sve_model", "mistralai/Mistral-7B-v0.1", "choice"),
            gpu_param("sve_gpu", "NVIDIA A100 80GB SXM", given=(("sve_engine", "vllm"),)),
            Param("sve_context", "4096", "int"),
            Param("sve_kv", "float8", "choice"), Param("sve_util", "0.8", "float"), Param("sve_seqs", "16", "int"),
            Param("sve_batched", "4096", "int"), Param("sve_offload", "2", "float"),
            Param("sve_slots", "2", "int", given=(("sve_engine", "llama.cpp"), ("sve_ngl", "20"))),
            Param("sve_ngl", "20", "int", given=(("sve_engine", "llama.cpp"),)),
            Param("sve_cache", "q8_0", "choice", given=(("sve_engine", "llama.cpp"),))),
)
