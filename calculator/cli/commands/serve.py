"""`serve MODEL --gpu G [--gpus N] [--tensor T] ...`: how a serving engine (vLLM V1 or SGLang, as
they are now or in the release of the published logs) splits each card, how many sequences of --context tokens run at once, whether
--users of them fit, and the GPUs each tensor-parallel size needs for them."""

from __future__ import annotations

from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, find_gpu, platform_gpus, print_json, render_table, resolve_model
from calculator.answers.serving_json import dtype_fallback_of


def register(commands, shared) -> None:
    from calculator.distributed.llama_cpp import CACHE_TYPES, SERVER_SLOTS
    from calculator.serving.engines import ENGINES, KV_DTYPES, WEIGHT_DTYPES
    from calculator.serving.versions import ENGINE_VERSIONS
    from calculator.serving.vllm import USAGES

    p = add_command(commands, "serve", shared, ("model", "trust", "json"), run,
                    help="memory of a serving engine (vLLM, SGLang): KV pool, concurrent sequences, GPUs needed")
    p.add_argument("--gpu", required=True, help="GPU: a key or a name such as h100, a100-80gb, l4, rtx4090 (see calculator/core/gpus.toml)")
    p.add_argument("--gpus", type=int, default=None,
                   help="GPUs of that kind (default: --tensor); more than --tensor makes replicas (data parallel)")
    p.add_argument("--tensor", type=int, default=None,
                   help="tensor-parallel size, vLLM's --tensor-parallel-size (default: --gpus, else 1)")
    p.add_argument("--dtype", default=None,
                   help=f"weights: {', '.join(WEIGHT_DTYPES)} (float8 and int8: w8a8 or fp8 checkpoints; "
                        "int4: w4a16 such as GPTQ or AWQ), or a format: mxfp4 (experts only), nvfp4, fp8-block128, "
                        "torchao-int8, torchao-int4 (dense models); "
                        "default: the checkpoint's own format when the engine runs it on the card (gpt-oss: mxfp4), "
                        "else bfloat16")
    p.add_argument("--kv-dtype", "--kv-cache-dtype", dest="kv_dtype", default="auto",
                   help=f"--kv-cache-dtype: {', '.join(KV_DTYPES)} (auto: the model's dtype; fp8 = float8)")
    p.add_argument("--context", type=int, default=None,
                   help="tokens per sequence, prompt and answer together: --max-model-len (default: the model's "
                        "positions, as vLLM does)")
    p.add_argument("--users", type=int, default=1, help="sequences that must run at once (default 1)")
    p.add_argument("--gpu-memory-utilization", "--mem-fraction-static", dest="utilization", type=float, default=None,
                   help="vLLM: share of each card's total memory (default 0.9); SGLang: --mem-fraction-static "
                        "(default: its table on the card and the tensor-parallel size)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="tokens of the profile run and of each scheduling step (SGLang: --chunked-prefill-size, "
                        "which its default --mem-fraction-static leaves room for); default: vLLM's for the card and "
                        "usage context: vllm serve 8192 on cards of 70 GiB and more except the A100, else 2048)")
    p.add_argument("--max-num-seqs", type=int, default=None,
                   help="requests per step (default: 1024 on those cards, else 256)")
    p.add_argument("--usage-context", choices=USAGES, default="server",
                   help="which vLLM entry point's defaults: server (vllm serve, default) or offline (the LLM class: "
                        "16384 / 8192 tokens per step)")
    p.add_argument("--cpu-offload-gb", type=float, default=0.0, help="GiB of weights per GPU kept in CPU memory")
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="tokens of prompt every sequence shares (prefix caching stores them once); default 0")
    p.add_argument("--engine", choices=ENGINES + ("llama.cpp",), default="vllm",
                   help="vllm (V1; default), sglang or llama.cpp (llama-server's KV buffer)")
    versions = "; ".join(f"{engine}: {', '.join(known)}" for engine, known in ENGINE_VERSIONS.items())
    p.add_argument("--engine-version", default=None,
                   help=f"whose accounting to follow ({versions}; the first is the default). vLLM 0.19: share 0.9, "
                        "CUDA graphs outside it; SGLang 0.4.6: its older --mem-fraction-static table (the published "
                        "logs of bench/data/serving_logs.json)")
    p.add_argument("--enforce-eager", action="store_true", help="vLLM: no CUDA graphs (nothing kept for them)")
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None,
                   help="vLLM: the KV cache pool per GPU in bytes, set by hand (the share no longer applies)")
    p.add_argument("--enable-expert-parallel", dest="expert_parallel", action="store_true",
                   help="vLLM: spread a mixture of experts' experts over every GPU (--gpus), not only over one "
                        "replica's tensor-parallel GPUs")
    p.add_argument("--slots", type=int, default=SERVER_SLOTS,
                   help=f"llama.cpp: -np, slots sharing the -c cells (default {SERVER_SLOTS}, llama-server's auto)")
    p.add_argument("--gpu-layers", type=int, default=999, help="llama.cpp: -ngl (default 999: every layer)")
    p.add_argument("--cache-type", default="f16", choices=tuple(CACHE_TYPES),
                   help="llama.cpp: --cache-type-k/-v (default f16)")
    p.add_argument("--no-kv-unified", dest="kv_unified", action="store_false",
                   help="llama.cpp: one stream per slot of -c / -np cells instead of one shared cache")
    # what each option defaults to, so that run() can tell an option given for another engine
    p.set_defaults(option_defaults={dest: p.get_default(dest) for dest in (*LLAMA_CPP_ONLY, *NOT_FOR_LLAMA_CPP)})


# Options one engine reads and the other would silently ignore: refused instead (dest names).
LLAMA_CPP_ONLY = ("slots", "gpu_layers", "cache_type", "kv_unified")
NOT_FOR_LLAMA_CPP = ("dtype", "kv_dtype", "tensor", "users", "utilization", "max_num_batched_tokens", "max_num_seqs",
                     "usage_context", "cpu_offload_gb", "shared_prefix", "engine_version", "enforce_eager",
                     "kv_cache_memory_bytes", "expert_parallel")
OPTION_NAMES = {"kv_dtype": "kv-cache-dtype", "utilization": "gpu-memory-utilization", "kv_unified": "no-kv-unified",
                "expert_parallel": "enable-expert-parallel"}


def refuse_other_engines_options(args) -> None:
    """An option the chosen engine does not read (llama.cpp's -np given to vLLM, vLLM's --dtype
    given to llama.cpp) is refused in one line rather than silently ignored."""
    from calculator.core.errors import CalculatorError

    foreign = NOT_FOR_LLAMA_CPP if args.engine == "llama.cpp" else LLAMA_CPP_ONLY
    for dest in foreign:
        if getattr(args, dest) != args.option_defaults[dest]:
            raise CalculatorError("serve_option_other_engine", option="--" + OPTION_NAMES.get(dest, dest.replace("_", "-")),
                                  engine=args.engine)


def run(args) -> int:
    from calculator.serving.engines import ENGINE_NAMES
    from calculator.serving.plan import serve
    from calculator.serving.sglang import SGLANG_LEGACY
    from calculator.serving.vllm import VLLM_CURRENT

    refuse_other_engines_options(args)
    card = find_gpu(args.gpu)
    args.gpus = platform_gpus(args, None)
    model = resolve_model(args)
    if args.engine == "llama.cpp":
        return run_llamacpp(args, model)
    plan = serve(model, card, engine=args.engine, gpus=args.gpus, tensor=args.tensor, dtype=args.dtype,
                 kv_dtype=args.kv_dtype, context=args.context, users=args.users, utilization=args.utilization,
                 max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
                 cpu_offload_gib=args.cpu_offload_gb, shared_prefix=args.shared_prefix,
                 usage=args.usage_context, engine_version=args.engine_version, enforce_eager=args.enforce_eager,
                 kv_cache_memory_bytes=args.kv_cache_memory_bytes, expert_parallel=args.expert_parallel)
    if args.json:  # the serving pages build the same JSON (answers_serving)
        from calculator.answers.serving_json import serve_json

        print_json(serve_json(model, plan))
        return 0
    r = plan.replica
    engine = f"{ENGINE_NAMES[plan.engine]} {plan.engine_version}"
    share = "of the total" if plan.engine == "vllm" else "of the free memory at start"
    print(f"Model: {model.name} ({model.source})   {engine}   {plan.gpus} x {card.name}, tensor parallel "
          f"{plan.tensor} ({plan.replicas} replica{'s' if plan.replicas > 1 else ''})   {plan.dtype} weights, "
          f"{plan.kv_dtype} cache   {plan.users} user(s) x {plan.context:,} tokens")
    rows = [["card (PyTorch's total)", format_bytes(plan.total_bytes_per_gpu)],
            [f"engine's share ({plan.utilization:g} {share})", format_bytes(r.requested_bytes_per_gpu)],
            ["weights", format_bytes(r.weights_bytes_per_gpu)]]
    if r.cpu_offload_bytes_per_gpu:
        rows.append(["  weights kept in CPU memory", format_bytes(r.cpu_offload_bytes_per_gpu)])
    if plan.engine == "vllm":
        rows += [[f"activation reserve (profile run, peak at the {r.profile_moment})",
                  format_bytes(r.activation_reserve_bytes)],
                 ["non-torch growth (workspaces, NCCL)", format_bytes(r.non_torch_bytes)],
                 ["CUDA graphs (estimated by the engine, out of the share)", format_bytes(r.cuda_graph_bytes)]]
    else:
        rows.append(["left for activations and CUDA graphs", format_bytes(r.activation_reserve_bytes)])
    rows.append(["KV cache pool", format_bytes(r.kv_pool_bytes_per_gpu)])
    print(render_table(["per GPU", "memory"], rows))
    blocks = f" ({r.kv_blocks:,} blocks of 16 tokens)" if r.kv_blocks is not None else ""
    print(f"KV cache: {format_bytes(plan.kv_bytes_per_token)} per token for the whole model, "
          f"{format_bytes(r.kv_bytes_per_token_per_gpu)} per GPU; pool of {r.kv_tokens:,} tokens{blocks}.")
    print(f"Sequences of {plan.context:,} tokens at once: {r.sequences:,} per replica "
          f"(the engine's concurrency figure: {r.max_concurrency:.2f}x), {plan.max_concurrent_sequences:,} in all.")
    print(f"Verdict for {plan.users} user(s): {VERDICTS[plan.verdict]}{REASONS.get(plan.reason, '')}")
    if plan.dtype_source == "shipped_not_run":  # the checkpoint's own format does not run on this card
        from calculator.serving.weights import shipped_refusal

        refused = shipped_refusal(model, card, plan.engine, plan.engine_version)
        if refused is not None:
            print(f"The checkpoint ships in {refused[0]}, which this engine does not run here: "
                  f"{refused[1].message('en')} These figures price a {plan.dtype} copy of the model.")
    fallback = dtype_fallback_of(model, plan)
    if fallback is not None:  # vLLM's --dtype auto does not keep the checkpoint's dtype on this card
        why = {"no_bfloat16": "this card does not run it",
               "no_bfloat16_nor_float16": "this card does not run it and vLLM refuses float16 for "
                                          f"{fallback['model_type']} models",
               "float16_refused": f"vLLM refuses float16 for {fallback['model_type']} models"}[fallback["reason"]]
        print(f"The checkpoint is in {fallback['checkpoint']}, but {why}: vLLM's --dtype auto serves it "
              f"in {fallback['served']}, as priced here.")
    layouts = [[str(lay.tensor), format_bytes(lay.weights_bytes_per_gpu), f"{lay.kv_tokens:,}",
                f"{lay.sequences_per_replica:,}", "-" if lay.replicas is None else str(lay.replicas),
                "-" if lay.gpus is None else str(lay.gpus)] for lay in plan.layouts]
    print(f"GPUs needed for {plan.users} sequence(s) of {plan.context:,} tokens:")
    print(render_table(["tensor parallel", "weights per GPU", "pool (tokens)", "sequences per replica", "replicas",
                        "GPUs"], layouts))
    best = plan.best_layout
    if best:
        print(f"Fewest GPUs: {best.gpus} x {card.name} (tensor parallel {best.tensor} x {best.replicas} "
              f"replica{'s' if best.replicas > 1 else ''}).")
    notes = {("vllm", "0.19"): "Accounting of vLLM 0.19 (CUDA graphs captured outside the share).",
             ("vllm", VLLM_CURRENT): f"Accounting of vLLM {VLLM_CURRENT} (CUDA graphs estimated and taken out of "
                                     "the share; --engine-version 0.19 for the older one).",
             ("sglang", SGLANG_LEGACY): "Accounting of SGLang 0.4.6 (its older --mem-fraction-static table).",
             }
    note = notes.get((plan.engine, plan.engine_version),
                     f"Accounting of SGLang {plan.engine_version} (its fraction leaves room for a chunked prefill "
                     f"and its CUDA graphs; --engine-version {SGLANG_LEGACY} for the older one).")
    print(f"Units: GiB = 2^30 bytes. {note}")
    return 0


def run_llamacpp(args, model) -> int:
    """What the serving chapter shows for llama.cpp: the KV buffer llama-server allocates."""
    from calculator.serving.launch import llamacpp_command
    from calculator.serving.plan import llamacpp_cache

    cache = llamacpp_cache(model.spec, args.context or 0, args.slots, args.cache_type, args.cache_type,
                           gpu_layers=args.gpu_layers, unified=args.kv_unified, config=model.config)
    command = llamacpp_command("model.gguf", context=cache.n_ctx, slots=args.slots, gpu_layers=args.gpu_layers,
                               cache_type_k=args.cache_type, cache_type_v=args.cache_type, unified=args.kv_unified)
    if args.json:
        print_json({"model": model.name, "source": model.source, "max_positions": model.spec.max_positions,
                    **cache.to_json(), "command": command})
        return 0
    print(f"Model: {model.name} ({model.source})   llama.cpp (llama-server)   -c {cache.n_ctx:,} cells, "
          f"{cache.slots} slot(s){' sharing them' if cache.unified else ''}   cache {args.cache_type}")
    print(render_table(["KV cache", "memory"], [["on the GPU", format_bytes(cache.gpu_bytes)],
                                                ["in host memory", format_bytes(cache.host_bytes)],
                                                ["total", format_bytes(cache.total_bytes)]]))
    print(f"Longest sequence per slot: {cache.tokens_per_slot:,} tokens; {cache.layers_on_gpu} layers keep their "
          "cache on the GPU. The weights come on top (see `llama-cpp`).")
    print("Units: GiB = 2^30 bytes.")
    print(command)
    return 0


VERDICTS = {"fits": "fits", "tight": "TIGHT (the engine asks for memory inside the headroom the card needs)",
            "too_big": "does NOT fit"}
REASONS = {"no_cache_room": ": nothing is left for the KV cache after the weights and the activation reserve.",
           "context_exceeds_pool": ": not one sequence of this context fits in the pool (vLLM refuses to start).",
           "over_usable": ": the engine asks for more than the process can have beside the CUDA context.",
           "too_many_users": ": fewer sequences fit at once than there are users."}
