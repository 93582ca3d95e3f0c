"""`zero-offload --json` and `multi-gpu --json`, built once for each command and for the page
that shows the same figures (cpu-offloading#zero-offload, serving#multi-gpu-inference), and
their paste-ready answers: the page's "Copy as answer" writes the command's own answer.

The verdicts come from the engine (zero_offload_answer; serving.plan's transformers_multi_gpu);
this module only picks which one to say and formats nothing itself."""

from __future__ import annotations

from calculator.answers.answer import Answer, card_assumption, card_name, case_pairs

VERDICT_ORDER = ("fits", "tight", "too_big")

# ZeRO-Offload's optimizer in CPU memory, as the chapter's DeepSpeed config writes it
ZERO_OFFLOAD_CONFIG = ('{"bf16": {"enabled": true},\n'
                       ' "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}},\n'
                       ' "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}')


def zero_offload_json(model, card, tokens: int) -> dict:
    """Model states per GPU without and with ZeRO-Offload, their verdicts, the step's transfers
    against its GPU work, and the tokens per step from which the transfers hide."""
    from calculator.answers.verdicts import zero_offload_answer
    from calculator.core.budget import Budget
    from calculator.distributed.offload import tokens_to_hide_transfers, zero_offload

    parameters = model.summary.trainable_parameters
    result = zero_offload(parameters, card, tokens)
    plain, offloaded = zero_offload_answer(result, card).figures["per_gpu_verdicts"]
    budget = Budget(card)
    return {"model": model.name, "gpu": card.key, **result.to_json(), "plain_verdict": plain,
            "verdict": offloaded, "threshold_tokens": tokens_to_hide_transfers(parameters, card),
            "usable_bytes": budget.usable_bytes, "headroom_bytes": budget.headroom_bytes}


FLOAT_CODES = ("float32", "float16", "bfloat16")


def multi_gpu_json(model, card, gpus: int, dtype: str, batch: int, context: int) -> dict:
    """transformers over `gpus` cards: the fullest GPU under device_map="auto" and under the
    tensor-parallel plan (None where the heads do not split), and the loading code of each."""
    from calculator.core.budget import Budget
    from calculator.serving.launch import transformers_code
    from calculator.serving.plan import transformers_multi_gpu

    result = transformers_multi_gpu(model, card, gpus, dtype, batch, context)
    worst = max(range(len(result.device_map_weights)),
                key=lambda i: result.device_map_weights[i] + result.device_map_cache[i])
    budget = Budget(card)
    tp = result.tp_weights_bytes is not None
    code_dtype = result.weights_dtype if result.weights_dtype in FLOAT_CODES else "bfloat16"  # a format: its compute dtype
    return {"model": model.load_id or model.name, "gpu": card.key, "gpus": gpus, "dtype": dtype, "batch": batch,
            "context": context, "heads": model.spec.heads, "weights_dtype": result.weights_dtype,
            "weights_source": result.weights_source, "no_tensor_parallel": result.no_tensor_parallel,
            "device_map": {"weights_bytes": result.device_map_weights[worst],
                           "cache_bytes": result.device_map_cache[worst], "peak_bytes": result.device_map_peak_bytes,
                           "verdict": result.device_map_verdict, "gpus_at_work": 1,
                           "code": transformers_code(model.load_id or model.name, gpus, code_dtype, "device_map")},
            "tensor_parallel": {"weights_bytes": result.tp_weights_bytes, "cache_bytes": result.tp_cache_bytes,
                                "peak_bytes": result.tp_peak_bytes, "verdict": result.tp_verdict, "gpus_at_work": gpus,
                                "code": transformers_code(model.load_id or model.name, gpus, code_dtype, "tp")} if tp else None,
            "activation_bytes": result.activation_bytes, "usable_bytes": budget.usable_bytes,
            "headroom_bytes": budget.headroom_bytes}


# ---------------------------------------------------------------- the answers

def zero_offload(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "gpu": card_name(data["gpu"]), "gpu_offload_bytes": data["gpu_offload_bytes"],
               "cpu_offload_bytes": data["cpu_offload_bytes"], "gpu_plain_bytes": data["gpu_plain_bytes"],
               "usable_bytes": data["usable_bytes"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), card_assumption(data),
                   ("zo_states", {}),
                   ("zo_step", {"tokens": data["tokens"], "link": data["link"],
                                "transfer_s": float(data["transfer_seconds"]),
                                "compute_s": float(data["compute_seconds"])})]
    advice = (("do_zo_hidden" if data["hidden"] else "do_zo_exposed", {"threshold": data["threshold_tokens"]}),
              ("do_zo_config", {}))
    case = case_pairs(data, zo_tokens=data["tokens"])
    return Answer("zero-offload", argv, (f"zo_{data['verdict']}", figures), tuple(assumptions), advice,
                  ("json", ZERO_OFFLOAD_CONFIG), ("cpu-offloading", "zero-offload", case), figures)


def best_way(data: dict) -> tuple[str, dict]:
    """The way the answer leads with: the tensor-parallel plan (every GPU at work) unless
    device_map's verdict is better."""
    ways = [("tensor_parallel", data["tensor_parallel"]), ("device_map", data["device_map"])]
    ways = [(name, way) for name, way in ways if way is not None]
    return min(ways, key=lambda pair: VERDICT_ORDER.index(pair[1]["verdict"]))


def multi_gpu(data: dict, argv: tuple[str, ...]) -> Answer:
    name, way = best_way(data)
    label = "device_map=\"auto\"" if name == "device_map" else f"DistributedConfig(tp_size={data['gpus']})"
    figures = {"model": data["model"], "gpu": card_name(data["gpu"]), "gpus": data["gpus"], "dtype": data["weights_dtype"],
               "batch": data["batch"], "context": data["context"], "way": label, "peak_bytes": way["peak_bytes"],
               "usable_bytes": data["usable_bytes"]}
    tp = data["tensor_parallel"]
    peaks = ("mg_peaks", {"device_map_peak_bytes": data["device_map"]["peak_bytes"],
                          "tp_peak_bytes": tp["peak_bytes"], "gpus": data["gpus"]}) if tp else \
        ("mg_peaks_no_tp", {"device_map_peak_bytes": data["device_map"]["peak_bytes"], "gpus": data["gpus"],
                            "heads": data["heads"]})
    if data["no_tensor_parallel"] == "format":
        peaks = ("mg_peaks_format", {"device_map_peak_bytes": data["device_map"]["peak_bytes"],
                                     "fmt": data["weights_dtype"]})
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), card_assumption(data), peaks,
                   ("mg_activations", {"activation_bytes": data["activation_bytes"]})]
    if data["weights_source"] == "dequantized":
        assumptions.append(("mg_dequantized", {"fmt": data["dtype"], "gpu": card_name(data["gpu"])}))
    too_big = way["verdict"] == "too_big"
    advice = (("do_mg_too_big", {}),) if too_big else (("do_mg_code", {}),)
    case = case_pairs(data, dtype=data["dtype"], svt_gpus=data["gpus"], svt_batch=data["batch"],
                 svt_context=data["context"])
    return Answer("multi-gpu", argv, (f"mg_{way['verdict']}", figures), tuple(assumptions), advice,
                  None if too_big else ("python", way["code"]), ("serving", "multi-gpu-inference", case), figures)


BUILDERS = {"zero-offload": zero_offload, "multi-gpu": multi_gpu}
