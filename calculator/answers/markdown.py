"""Paste-ready answers of the memory commands: what an answering command returned (its `--json`
object: the engine's figures and verdict) turned into an `Answer` (calculator/answers/answer.py),
which `markdown()` writes in the reader's language. The verdict in one sentence with its figures,
the assumptions, what to do (flags or code), the section link with every case value written out,
and the command that reproduces it. The offloading, time and parallelism commands have their
builders in offload_multi.py and parallel_json.py; `answer_for` finds any command's.

This layer compares nothing: every verdict comes from the JSON the engine produced (`verdict`,
`fits`, `largest_batch`...).
"""

from __future__ import annotations

from dataclasses import replace

from calculator.answers.answer import Answer, card_assumption, card_name, case_pairs, link_url, markdown  # noqa: F401
from calculator.answers.offload_multi import BUILDERS as OFFLOAD_MULTI
from calculator.answers.parallel_json import BUILDERS as MORE
from calculator.answers.verdicts import float16_assumed

ANSWERING = ("estimate", "inference", "train", "serve", "quantize", "llama-cpp", "offload", "tensor-parallel", "pipeline",
             "data-parallel", "speed", "zero-offload", "multi-gpu")


# ---------------------------------------------------------------- builders, one per command

def _memory_verdict(prefix: str, data: dict, figures: dict) -> tuple[str, dict]:
    if data.get("verdict") is None:
        return f"{prefix}_no_gpu", figures
    return f"{prefix}_{data['verdict']}", {**figures, "gpu": card_name(data["gpu"]),
                                          "usable_bytes": data["usable_bytes"]}


def estimate(data: dict, argv: tuple[str, ...]) -> Answer:
    row = data["rows"][0]
    figures = {"model": data["model"], "parameters": data["parameters"], "dtype": row["dtype"],
               "total_bytes": row["total_bytes"], "largest_layer_bytes": row["largest_layer_bytes"],
               "training_bytes": row["training_adam_bytes"] or 0}
    assumptions = [("model", {"model": data["model"], "model_class": data["model_class"]}),
                   ("weights_only", {})]
    verdict, advice = ("estimate", figures), [("do_overhead", {})]
    if row.get("verdict") is not None:  # --gpu: the first precision's verdict (estimate.fit_verdict)
        figures.update(rule_bytes=row["rule_of_thumb_bytes"])
        verdict = _memory_verdict("estimate", {**data, "verdict": row["verdict"]}, figures)
        assumptions.insert(1, card_assumption(data))
        if row["verdict"] != "fits":
            advice.insert(0, ("do_load_smaller", {}))
    return Answer("estimate", argv, verdict, tuple(assumptions), tuple(advice),
                  link=("estimator", "estimate", case_pairs(data, dtype=row["dtype"])), figures=figures)


def inference(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "batch": data["batch"], "context": data["context"], "dtype": data["dtype"],
               "total_bytes": data["total_bytes"], "weights_bytes": data["weights_bytes"],
               "kv_cache_bytes": data["kv_cache_bytes"], "activation_bytes": data["activation_peak_bytes"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("lengths", {"batch": data["batch"], "prompt": data.get("prompt") or data["context"],
                                "new_tokens": data.get("new_tokens") or 0, "mode": data["mode"],
                                "attention": data["attention_used"]})]
    advice = []
    if data.get("verdict") is not None:
        assumptions.insert(1, card_assumption(data))
        if float16_assumed(data["assumptions"]):  # the card's precision, none asked (verdicts.card_dtype)
            assumptions.append(("dp_float16", {"gpu": card_name(data["gpu"])}))
        advice.append(("do_largest", {"largest_batch": data["largest_batch"], "largest_context": data["largest_context"]}))
    advice.append(("do_context_chapter", {}))
    case = case_pairs(data, dtype=data["dtype"], batch=data["batch"], prompt=data.get("prompt"),
                 new_tokens=data.get("new_tokens"))
    return Answer("inference", argv, _memory_verdict("inference", data, figures), tuple(assumptions), tuple(advice),
                  link=("memory-estimate", "inference-overhead", case), figures=figures)


def train(data: dict, argv: tuple[str, ...]) -> Answer:
    setup = data["setup"]
    figures = {"model": data["model"], "method": setup["method"], "precision": setup["precision"],
               "batch": setup["micro_batch"], "sequence": setup["sequence"], "total_bytes": data["total_bytes"],
               "weights_bytes": data["weights_bytes"], "optimizer_bytes": data["optimizer_bytes"],
               "activations_bytes": data["activations_bytes"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("training", {k: setup[k] for k in ("optimizer", "checkpointing", "attention")} | {
                       "gpus": data["gpus"], "zero": data["zero_stage"]})]
    advice = []
    if data.get("verdict") is not None:
        assumptions.insert(1, card_assumption(data))
        if data["verdict"] != "fits" and data["largest_micro_batch"]:
            advice.append(("do_train_smaller", {"largest": data["largest_micro_batch"]}))
        elif data["verdict"] != "fits":
            advice.append(("do_train_none", {}))
    if "fewest_gpus" in data:  # --gpu: the fewest of these GPUs that hold the step, by strategy
        advice += _fewest_advice(data)
    advice.append(("do_training_chapter", {}))
    case = case_pairs(data, batch=setup["micro_batch"], sequence=setup["sequence"], method=setup["method"],
                 precision=setup["precision"], optimizer=setup["optimizer"], checkpointing=setup["checkpointing"])
    verdict, anchor = _memory_verdict("train", data, figures), "zero" if data["zero_stage"] else "training-memory"
    if data["cpu_bytes"]:  # ZeRO-Offload: what each GPU's process keeps in CPU memory
        assumptions.append(("train_cpu", {"cpu_bytes": data["cpu_bytes"]}))
    if "methods" in data:  # --compare-methods: full fine-tuning, LoRA and QLoRA side by side
        verdict, anchor = _methods_verdict(data, figures), "lora"
        assumptions.insert(-1, ("lora_setup", {"rank": setup["lora_rank"], "targets": setup["lora_targets"]}))
    return Answer("train", argv, verdict, tuple(assumptions), tuple(advice),
                  link=("fine-tuning", anchor, case), figures=figures)


def _fewest_advice(data: dict) -> list[tuple[str, dict]]:
    from calculator.answers.training_json import STRATEGY_LABELS, fewest_pick

    pick, gpu = fewest_pick(data["fewest_gpus"]), card_name(data["gpu"])
    advice = [("do_train_fewest", {"gpus": pick["gpus"], "strategy": STRATEGY_LABELS[pick["strategy"]], "gpu": gpu})
              if pick["gpus"] else ("do_train_fewest_none", {"gpu": gpu})]
    if pick["offload_gpus"]:
        advice.append(("do_train_fewest_offload", {"gpus": pick["offload_gpus"]}))
    return advice


def _methods_verdict(data: dict, figures: dict) -> tuple[str, dict]:
    methods = data["methods"]
    figures.update({f"{m}_bytes": methods[m]["total_bytes"] for m in ("full", "lora", "qlora")})
    if data.get("verdict") is None:
        return "train_methods", figures
    figures.update({f"{m}_largest": methods[m]["largest_micro_batch"] for m in ("full", "lora", "qlora")})
    return "train_methods_gpu", {**figures, "gpu": card_name(data["gpu"]), "usable_bytes": data["usable_bytes"]}


def serve(data: dict, argv: tuple[str, ...]) -> Answer:
    from calculator.serving.engines import ENGINE_NAMES
    from calculator.serving.launch import sglang_command, vllm_command

    if data.get("engine") == "llama.cpp":  # llama-server's buffers: the llama-cpp command answers them
        from calculator.core.errors import CalculatorError

        raise CalculatorError("answer_llamacpp_serve")
    figures = {"model": data["model"], "gpus": data["gpus"], "gpu": card_name(data["gpu"]),
               "engine": ENGINE_NAMES[data["engine"]], "kv_pool_bytes": data["kv_pool_bytes_per_gpu"],
               "kv_tokens": data["kv_tokens"], "sequences": data["max_concurrent_sequences"],
               "context": data["context"], "users": data["users"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("serving_card", {"gpu": figures["gpu"], "total_bytes": data["total_bytes_per_gpu"],
                                     "share": data["gpu_memory_utilization"],
                                     "requested_bytes": data["requested_bytes_per_gpu"]}),
                   ("serving_setup", {"dtype": data["dtype"], "kv_dtype": data["kv_dtype"], "context": data["context"],
                                      "tensor": data["tensor_parallel"], "engine": figures["engine"],
                                      "version": data["engine_version"]}),
                   ("serving_kv", {"per_token_bytes": data["kv_bytes_per_token"], "kv_tokens": data["kv_tokens"]})]
    if data.get("dtype_source") == "as_shipped":  # no precision asked: the checkpoint's own (serving.weights)
        assumptions.insert(3, ("serving_as_shipped", {"dtype": data["dtype"]}))
    elif data.get("shipped_format"):  # shipped in a format the engine does not run on this card
        assumptions.insert(3, ("serving_shipped_not_run", {"fmt": data["shipped_format"], "dtype": data["dtype"],
                                                           "gpu": figures["gpu"]}))
    fallback = data.get("dtype_fallback")  # vLLM's --dtype auto on a card without the checkpoint's dtype
    if fallback:
        assumptions.insert(3, (f"serving_fallback_{fallback['reason']}", {
            "dtype": fallback["checkpoint"], "served": fallback["served"], "gpu": figures["gpu"],
            "model_type": fallback["model_type"]}))
    advice = [("do_serve_flags", {})]
    best = data.get("best_layout")  # the engine's fewest GPUs (serving_plan.Plan.best_layout), not the first layout
    layout = {"tensor": data["tensor_parallel"], "replicas": data["replicas"]}
    if data["verdict"] != "fits" and best:
        advice.insert(0, ("do_serve_layout", {"gpus": best["gpus"], "tensor": best["tensor"],
                                              "gpu": figures["gpu"]}))
        layout = {"tensor": best["tensor"], "replicas": best["replicas"]}  # the command starts what it advises
    line = _engine_line(data, layout, vllm_command, sglang_command)
    case = case_pairs(data, dtype=data["dtype"], context=data["context"], users=data["users"], tensor=data["tensor_parallel"])
    return Answer("serve", argv, (f"serve_{data['verdict']}", figures), tuple(assumptions), tuple(advice),
                  ("bash", line), ("serving", "serving-memory", case), figures)


def _engine_line(data: dict, layout: dict, vllm_command, sglang_command) -> str:
    """The engine's command for the layout and every setting the answer priced: the share of the
    card, the batched tokens and sequences a step (vLLM), the CPU offload; none left unset."""
    options = {**layout, "dtype": data["dtype"], "kv_dtype": data["kv_dtype"], "context": data["context"]}
    share = data.get("gpu_memory_utilization")
    if data["engine"] != "vllm":
        return sglang_command(data["model"], **options, fraction=share)
    offload = data.get("cpu_offload_bytes_per_gpu") or 0
    return vllm_command(data["model"], **options, utilization=share, max_num_seqs=data.get("max_num_seqs"),
                        max_num_batched_tokens=data.get("max_num_batched_tokens"), cpu_offload_gib=offload / 2**30)


def quantize(data: dict, argv: tuple[str, ...]) -> Answer:
    rows = {row["format"]: row for row in data["rows"]}
    picked = [name for name in ("bfloat16", "bnb-int8", "bnb-nf4", "gptq-4bit", "Q4_K") if name in rows]
    figures = {"model": data["model"], **{f"{name}_bytes": rows[name]["total_bytes"] for name in picked}}
    sizes = [(name, rows[name]["total_bytes"]) for name in picked]  # written in the reader's units
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("group_size", {"group_size": data["group_size"]})]
    if data.get("gpu"):
        fitting = [name for name in picked if rows[name].get("fits")]
        assumptions.insert(1, ("card_total", {"gpu": card_name(data["gpu"]), "total_bytes": data["gpu_memory_bytes"]}))
        verdict = ("quantize_fits", {"model": data["model"], "gpu": card_name(data["gpu"]),
                                     "formats": ", ".join(fitting) or "—", "sizes": sizes})
    else:
        verdict = ("quantize", {"model": data["model"], "sizes": sizes})
    return Answer("quantize", argv, verdict, tuple(assumptions), (("do_quantization_chapter", {}),),
                  link=("quantization", "formats", case_pairs(data)), figures=figures)


def llama_cpp(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "type": data["type"], "context": data["context"], "ngl": data["ngl"],
               "gpu": card_name(data["gpu"]), "gpu_bytes": data["gpu_bytes"], "cpu_bytes": data["cpu_bytes"],
               "tokens_per_second": float(data["tokens_per_second"]), "slowdown": float(data["slowdown"])}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("llama_setup", {"type": data["type"], "cache_type": data["cache_type"], "context": data["context"],
                                    "limit_bytes": data["limit_bytes"], "cpu_gbs": float(data["cpu_gbs"])})]
    return Answer("llama-cpp", argv, ("llama_cpp", figures), tuple(assumptions), (("do_llama_flags", {}),),
                  ("bash", data["command"]), ("cpu-offloading", "llama-cpp", case_pairs(data, context=data["context"])),
                  figures)


def offload(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "dtype": data["dtype"], "total_bytes": data["total_bytes"],
               "gpu_bytes": data["gpu_bytes"], "cpu_bytes": data["cpu_bytes"], "disk_bytes": data["disk_bytes"],
               "gpu": card_name(data["gpu"]), "slowdown": float(data["cost"]["slowdown"])}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}),
                   ("offload_budget", {"gpu_budget_bytes": data["gpu_budget"], "gpu": figures["gpu"],
                                       "quantization": data["quantization"], "link": data["cost"]["link"]})]
    return Answer("offload", argv, ("offload", figures), tuple(assumptions), (("do_offload_code", {}),),
                  ("python", data["snippet"].rstrip()), ("cpu-offloading", "device-map", case_pairs(data, dtype=data["dtype"])),
                  figures)


BUILDERS = {"estimate": estimate, "inference": inference, "train": train, "serve": serve, "quantize": quantize,
            "llama-cpp": llama_cpp, "offload": offload, **MORE, **OFFLOAD_MULTI}


def answer_for(command: str, data: dict, argv: tuple[str, ...], typed: str | None = None) -> Answer:
    """The answer to what `command` returned; the link names the model as it was asked for
    (`typed`: a catalog name stays a catalog name)."""
    answer = BUILDERS[command](data, tuple(argv))
    slug, anchor, case = answer.link
    if typed:
        case = tuple((k, typed if k == "model" else v) for k, v in case)
    return replace(answer, link=(slug, anchor, case))
