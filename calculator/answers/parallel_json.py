"""Paste-ready answers for the time and parallelism commands (tensor-parallel, pipeline,
data-parallel, speed): each command's JSON, as its `--json` prints it, written as an
answers.Answer. The `*_json` functions build that JSON from the engine's answer, for the
command and for the widget alike, so the page's answer and the CLI's are the same object."""

from __future__ import annotations

from calculator.answers.answer import Answer, card_assumption, card_name, case_pairs
from calculator.answers.verdicts import card_chose_float16, float16_assumed


# ---------------------------------------------------------------- the commands' JSON

def tensor_parallel_json(model, card, tokens: int, answer) -> dict:
    """`tensor-parallel --json`: the split, the all-reduce time per link, the verdict."""
    from calculator.answers.verdicts import verdict_json
    from calculator.distributed.parallel import communication_seconds, links_for

    result = answer.detail
    links = {name: communication_seconds(result, gbs) for name, gbs in links_for(card).items()}
    return {"model": model.name, "gpu": card.key, "tokens": tokens, **result.to_json(),
            "communication_seconds": links, **verdict_json(answer)}


def pipeline_json(model, card, dtype: str, gpus: int, answer, micro_batches: int | None = None) -> dict:
    """`pipeline --json`: each stage's layers and bytes, the bubble, the verdict."""
    from calculator.answers.verdicts import verdict_json
    from calculator.distributed.parallel import bubble_fraction, tied_head_copy_bytes

    bubble = bubble_fraction(gpus, micro_batches) if micro_batches is not None else None
    return {"model": model.name, "dtype": dtype, "gpus": gpus, "total_bytes": model.summary.total_bytes_at(dtype),
            "stages": [s.to_json() for s in answer.detail],
            "tied_head_copy_bytes": tied_head_copy_bytes(model.summary, model.spec, dtype),
            "micro_batches": micro_batches, "bubble_fraction": bubble,
            "gpu": card.key if card else None, **verdict_json(answer)}


def data_parallel_json(model, card, answer, samples: int, tokens: int, gpus_per_node: int, network: str) -> dict:
    """`data-parallel --json`: the time on one GPU and on all of them, and the case it ran."""
    figures = {k: v for k, v in answer.figures.items() if k != "seconds_by_gpus"}
    return {"model": model.name, "gpu": card.key, "samples": samples, "tokens": tokens,
            "gpus_per_node": gpus_per_node, "network": network, **figures,
            "assumptions": [a.to_json() for a in answer.assumptions]}


def speed_json(model, card, dtypes: list[str], work, batches, precision=None) -> dict:
    """`speed --json` (without --measured): per precision and batch, the peak, its verdict and
    the roofline speed of the workload `work`, with the largest batch that fits. `precision`:
    the compute_dtype assumption when the precision was the card's default, not asked for."""
    from calculator.core.budget import Budget
    from calculator.answers.verdicts import speed_answer

    answers = {dtype: speed_answer(model, card, dtype, work, batches) for dtype in dtypes}
    rows = [{**row, "fits": row["verdict"] == "fits"} for answer in answers.values() for row in answer.figures["rows"]]
    budget = Budget(card)
    return {"model": model.name, "gpu": card.key, "gpu_memory_bytes": card.memory_bytes,
            "usable_bytes": budget.usable_bytes, "headroom_bytes": budget.headroom_bytes, "dtypes": list(dtypes),
            "workload": work.workload, "prompt": work.prompt, "new_tokens": work.new_tokens,
            "encoder_tokens": work.encoder_tokens, "sequence": work.prompt if not work.generates else None,
            "largest_batch": {dtype: answer.figures["largest_batch"] for dtype, answer in answers.items()},
            "rows": rows, "assumptions": [a.to_json() for a in ((precision,) if precision else ())
                                          + next(iter(answers.values())).assumptions]}


# ---------------------------------------------------------------- builders, one per command

def _milliseconds(links: dict) -> list[tuple[str, float]]:
    return [(name, seconds * 1000) for name, seconds in links.items()]


def tensor_parallel(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "degree": data["degree"], "dtype": data["dtype"], "gpu": card_name(data["gpu"]),
               "per_gpu_bytes": data["per_gpu_bytes"], "replicated_bytes": data["replicated_bytes"],
               "total_bytes": data["total_bytes"], "usable_bytes": data["usable_bytes"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), card_assumption(data),
                   ("tp_forward", {"tokens": data["tokens"], "allreduces": data["allreduces_per_forward"],
                                   "allreduce_bytes": data["allreduce_bytes"],
                                   "links_ms": _milliseconds(data["communication_seconds"])})]
    advice = (("do_tp", {"degree": data["degree"]}), ("do_parallelism_chapter", {}))
    case = case_pairs(data, dtype=data["dtype"], tp_tokens=data["tokens"], tp_degree=data["degree"])
    return Answer("tensor-parallel", argv, (f"tp_{data['verdict']}", figures), tuple(assumptions), advice,
                  link=("parallelism", "tensor-parallelism", case), figures=figures)


def pipeline(data: dict, argv: tuple[str, ...]) -> Answer:
    largest = max(data["stages"], key=lambda stage: stage["bytes"])
    figures = {"model": data["model"], "gpus": data["gpus"], "dtype": data["dtype"], "total_bytes": data["total_bytes"],
               "largest_bytes": largest["bytes"], "stage": largest["gpu"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), ("pp_weights", {})]
    if data.get("gpu"):
        figures.update(gpu=card_name(data["gpu"]), usable_bytes=data["usable_bytes"])
        assumptions.insert(1, card_assumption(data))
    if data.get("bubble_fraction") is not None:
        assumptions.append(("pp_bubble", {"micro_batches": data["micro_batches"],
                                          "bubble_percent": round(100 * data["bubble_fraction"], 1)}))
    advice = (("do_pp", {"gpus": data["gpus"]}), ("do_parallelism_chapter", {}))
    verdict = f"pp_{data['verdict']}" if data.get("verdict") else "pp_no_gpu"
    case = case_pairs(data, dtype=data["dtype"], pp_gpus=data["gpus"])
    return Answer("pipeline", argv, (verdict, figures), tuple(assumptions), advice,
                  link=("parallelism", "pipeline-parallelism", case), figures=figures)


def data_parallel(data: dict, argv: tuple[str, ...]) -> Answer:
    figures = {"model": data["model"], "samples": data["samples"], "tokens": data["tokens"], "gpus": data["gpus"],
               "nodes": data["nodes"], "gpu": card_name(data["gpu"]), "time_duration": data["seconds"],
               "one_gpu_duration": data["one_gpu_seconds"], "speedup": float(data["speedup"])}
    setup = {"gpus_per_node": data["gpus_per_node"], "nodes": data["nodes"], "network": data["network"],
             "dtype": data["dtype"]}
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), ("dp_setup" if data["nodes"] > 1 else "dp_setup_one", setup)]
    compute = next(a["value"] for a in data["assumptions"] if a["id"] == "compute_dtype")
    if card_chose_float16(compute):
        assumptions.append(("dp_float16", {"gpu": figures["gpu"]}))
    if data["training"]:
        assumptions.append(("dp_training_steps", {"steps": data["steps"], "compute_ms": data["compute_seconds"] * 1000,
                                            "communication_ms": data["communication_seconds"] * 1000}))
        advice = ("do_dp_training", {"nodes": data["nodes"], "gpus_per_node": data["gpus_per_node"]})
    else:
        assumptions.append(("dp_inference_batch", {"batch": data["batch"]}))
        advice = ("do_dp_inference", {"gpus": data["gpus"]})
    verdict = "dp_training" if data["training"] else "dp_inference"
    case = case_pairs(data, dp_tokens=data["tokens"], dp_train=str(data["training"]).lower(), dp_samples=data["samples"],
                 dp_per_node=data["gpus_per_node"], dp_nodes=data["nodes"], dp_network=data["network"])
    return Answer("data-parallel", argv, (verdict, figures), tuple(assumptions), (advice,),
                  link=("slow-model", "data-parallelism", case), figures=figures)


def speed(data: dict, argv: tuple[str, ...]) -> Answer:
    if len(data["dtypes"]) > 1 and len({row["batch"] for row in data["rows"]}) == 1:
        return _speed_by_dtype(data, argv)
    first = data["dtypes"][0]
    rows = [row for row in data["rows"] if row["dtype"] == first]
    fitting = [row for row in rows if row["verdict"] == "fits"]
    row = max(fitting, key=lambda r: r["batch"]) if fitting else rows[0]
    generates = data["sequence"] is None
    figures = {"model": data["model"], "gpu": card_name(data["gpu"]), "dtype": first, "batch": row["batch"],
               "largest_batch": data["largest_batch"][first], "items_per_second": float(row["items_per_second"])}
    if generates:
        figures.update(tokens_per_second=float(row["tokens_per_second"]),
                       time_per_token_ms=row["time_per_token_s"] * 1000,
                       first_token_ms=row["time_to_first_token_s"] * 1000)
    else:
        figures["forward_ms"] = row["forward_s"] * 1000
    verdict = ("speed_generation" if generates else "speed_forward") + ("" if fitting else "_too_big")
    lengths = ("speed_lengths", {"prompt": data["prompt"], "new_tokens": data["new_tokens"]}) if generates \
        else ("speed_forward_lengths", {"tokens": data["sequence"]})
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), card_assumption(data), lengths,
                   ("speed_roofline", {"workload": data["workload"]})]
    if float16_assumed(data["assumptions"]):
        assumptions.append(("dp_float16", {"gpu": figures["gpu"]}))  # the card's default, as data-parallel says it
    advice = (("do_speed", {"largest_batch": figures["largest_batch"]}),)
    case = case_pairs(data, dtype=first, batch=row["batch"], prompt=data["prompt"], new_tokens=data["new_tokens"])
    return Answer("speed", argv, (verdict, figures), tuple(assumptions), advice,
                  link=("slow-model", "batch-size", case), figures=figures)


def _speed_by_dtype(data: dict, argv: tuple[str, ...]) -> Answer:
    """speed --dtypes A B C at one batch: each precision's speed and whether it fits."""
    generates = data["sequence"] is None
    rate = "tokens_per_second" if generates else "items_per_second"
    rows, batch = data["rows"], data["rows"][0]["batch"]
    figures = {"model": data["model"], "gpu": card_name(data["gpu"]), "batch": batch,
               "token_rates" if generates else "item_rates": [(row["dtype"], float(row[rate])) for row in rows],
               "fitting": ", ".join(row["dtype"] for row in rows if row["verdict"] == "fits") or "—"}
    lengths = ("speed_lengths", {"prompt": data["prompt"], "new_tokens": data["new_tokens"]}) if generates \
        else ("speed_forward_lengths", {"tokens": data["sequence"]})
    assumptions = [("model", {"model": data["model"], "model_class": "auto"}), card_assumption(data), lengths,
                   ("speed_roofline", {"workload": data["workload"]})]
    case = case_pairs(data, batch=batch, prompt=data["prompt"], new_tokens=data["new_tokens"])
    verdict = "speed_dtypes_generation" if generates else "speed_dtypes_forward"
    return Answer("speed", argv, (verdict, figures), tuple(assumptions), (("do_speed_dtypes", {}),),
                  link=("slow-model", "precision", case), figures=figures)


BUILDERS = {"tensor-parallel": tensor_parallel, "pipeline": pipeline, "data-parallel": data_parallel, "speed": speed}
