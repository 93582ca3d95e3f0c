"""Evidence set beside the calculator: what a pasted log or table says, what the calculator
gives for the same case, what the difference means, and what to do.

One function per kind; each returns a Comparison of findings and advice, every one a message
code (UI catalog key "evidence.<code>") with its figures. Sizes are in bytes under keys that
end in "_bytes"; the formatting layers (CLI, page, Markdown) write them in the reader's units.
The serving comparison reuses the serving engine (serving_plan.serve): the log's own settings
(context, tensor parallel size, KV cache dtype, utilization) go in where it states them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calculator.core.units import GIB
from calculator.core.errors import CalculatorError
from calculator.answers.evidence import Evidence

MATCH = 0.03  # within 3 %: the calculator's accounting reproduces the engine's figure


@dataclass(frozen=True)
class Finding:
    code: str
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    findings: tuple[Finding, ...] = ()
    advice: tuple[Finding, ...] = ()

    def to_json(self) -> dict:
        as_list = lambda items: [{"code": f.code, **{k: _plain(v) for k, v in f.params.items()}}  # noqa: E731
                                 for f in items]
        return {"findings": as_list(self.findings), "advice": as_list(self.advice)}


def _plain(value: object) -> object:
    """A refusal travels in JSON as its code and English message."""
    if isinstance(value, CalculatorError):
        return {"code": value.code, "message": value.message("en")}
    return value


@dataclass(frozen=True)
class Case:
    """What the page (or the CLI's options) says the deployment is. All optional."""

    model: object | None = None  # calculator.models.seam.Model
    card: object | None = None  # calculator.core.gpus.Gpu
    dtype: str = "bfloat16"
    context: int | None = None
    tensor: int | None = None
    users: int = 1
    # The engine accounting the log was written by (serving.versions.ENGINE_VERSIONS); None: the
    # engine's current one. An older vLLM log (CUDA graphs outside the share) names "0.19", an
    # older SGLang log "0.4.6".
    engine_version: str | None = None


def close(a: float, b: float, tolerance: float = MATCH) -> bool:
    return b > 0 and abs(a - b) <= tolerance * b


def compare(evidence: Evidence, case: Case) -> Comparison:
    """The evidence against the case; a case the comparison cannot use says so as a finding."""
    return COMPARERS[evidence.kind](evidence.figures, case)


# ---------------------------------------------------------------- vLLM and SGLang

def _kv_dtype(figures: dict) -> str:
    name = str(figures.get("kv_cache_dtype", "auto"))
    return "float8" if name.startswith("fp8") else "auto"


def _plan(case: Case, figures: dict, engine: str, utilization: float | None):
    from calculator.serving.plan import serve

    return serve(case.model, case.card, engine=engine, dtype=case.dtype, kv_dtype=_kv_dtype(figures),
                 context=figures.get("max_model_len") or case.context, tensor=figures.get("tensor_parallel") or case.tensor,
                 utilization=utilization, layouts=False, engine_version=case.engine_version)


def _serving(figures: dict, case: Case, engine: str) -> Comparison:
    if case.model is None or case.card is None:
        return Comparison((Finding("no_case"),), _serving_advice(figures, None))
    share_key = "gpu_memory_utilization" if engine == "vllm" else "mem_fraction_static"
    stated = figures.get(share_key)
    try:
        default = _plan(case, figures, engine, None)
    except CalculatorError as error:
        return Comparison((Finding("case_refused", {"error": error}),), (Finding("do_set_case"),))
    findings = [Finding("case", {"model": case.model.name, "gpu": case.card.name, "context": default.context,
                                 "tensor": default.tensor, "engine_version": default.engine_version})]
    calc = default.replica
    if "weights_bytes" in figures:
        same = close(figures["weights_bytes"], calc.weights_bytes_per_gpu, 0.05)
        findings.append(Finding("weights_match" if same else "weights_differ",
                                {"log_bytes": figures["weights_bytes"], "calc_bytes": calc.weights_bytes_per_gpu}))
    tokens = figures.get("kv_tokens")
    if tokens is None:
        findings.append(Finding("kv_missing"))
        return Comparison(tuple(findings), _serving_advice(figures, default))
    params = {"log_tokens": tokens, "calc_tokens": calc.kv_tokens, "share_key": share_key}
    default_share = default.utilization
    if close(tokens, calc.kv_tokens):
        code = "kv_matches_defaults" if stated in (None, default_share) else "kv_matches_stated"
        findings.append(Finding(code, {**params, "share": default_share if stated is None else stated}))
        return Comparison(tuple(findings), _serving_advice(figures, default))
    if stated is not None:  # the log says its share: the gap is something else when that is not it
        at_stated = _plan(case, figures, engine, stated).replica if stated != default_share else calc
        same = close(tokens, at_stated.kv_tokens)
        findings.append(Finding("kv_matches_stated" if same else "kv_differs",
                                {**params, "calc_tokens": at_stated.kv_tokens, "share": stated}))
        return Comparison(tuple(findings), _serving_advice(figures, default))
    implied = implied_share(tokens, calc, default)
    if implied is not None:
        at_implied = _plan(case, figures, engine, implied).replica
        if close(tokens, at_implied.kv_tokens):
            findings.append(Finding("kv_implies_share", {**params, "share": implied, "default": default_share}))
            return Comparison(tuple(findings), _serving_advice(figures, default, implied))
    findings.append(Finding("kv_differs", {**params, "share": default_share}))
    return Comparison(tuple(findings), _serving_advice(figures, default))


def implied_share(tokens: int, calc, plan) -> float | None:
    """The share of the card that gives the log's pool, other things equal: the pool grows by
    one byte per byte of share (vLLM: total x utilization; SGLang: free memory x fraction)."""
    per_token = calc.kv_pool_bytes_per_gpu / calc.kv_tokens if calc.kv_tokens else 0
    if not per_token:
        return None
    base = plan.total_bytes_per_gpu if plan.engine == "vllm" else calc.requested_bytes_per_gpu / plan.utilization
    share = plan.utilization + (tokens - calc.kv_tokens) * per_token / base
    share = round(share, 2)
    return share if 0.05 <= share <= 0.99 else None


def _serving_advice(figures: dict, plan, implied: float | None = None) -> tuple[Finding, ...]:
    advice = []
    concurrency = figures.get("max_concurrency")
    if concurrency is None and plan is not None:
        concurrency = round(plan.replica.max_concurrency, 2)
    if concurrency is not None and concurrency < 1:
        advice.append(Finding("do_context_too_long", {"concurrency": concurrency}))
    if implied is not None and plan is not None and implied < plan.utilization:
        advice.append(Finding("do_raise_share", {"share": implied, "default": plan.utilization}))
    if plan is not None and concurrency is not None and concurrency >= 1:
        advice.append(Finding("do_plan_users", {"sequences": int(concurrency)}))
    if not advice:
        advice.append(Finding("do_set_case"))
    return tuple(advice)


def _vllm(figures: dict, case: Case) -> Comparison:
    return _serving(figures, case, "vllm")


def _sglang(figures: dict, case: Case) -> Comparison:
    return _serving(figures, case, "sglang")


# ---------------------------------------------------------------- nvidia-smi

def card_for_total(total_bytes: int, field_name: str = "memory_mib"):
    """The catalog card whose total (nvidia-smi's, or PyTorch's) is nearest this one, if within
    0.5 % (drivers differ by a few MiB; the H100's 81,559 MiB and the A100's 81,920 do not)."""
    from calculator.core.gpus import gpus

    distance = lambda card: abs(getattr(card, field_name) * 2**20 - total_bytes)  # noqa: E731
    nearest = min(gpus().values(), key=distance)
    return nearest if distance(nearest) <= 0.005 * total_bytes else None


def card_of_row(name: object, total_bytes: int):
    """The card an nvidia-smi row shows: the one its printed name says when that card's memory is
    the row's (an RTX 4090 and an RTX A5000 both report 24,564 MiB), else the one its total
    says. nvidia-smi cuts long names ("NVIDIA H100 80GB HBM3"), which the total then reads."""
    from calculator.core.errors import CalculatorError
    from calculator.core.gpus import gpu

    by_total = card_for_total(total_bytes)
    try:
        named = gpu(str(name).strip()) if name else None
    except CalculatorError:
        named = None
    if named is not None and abs(named.memory_mib * 2**20 - total_bytes) <= 0.005 * total_bytes:
        return named
    return by_total


def _nvidia_smi(figures: dict, case: Case) -> Comparison:
    findings, advice = [], []
    for gpu in figures.get("gpus", []):
        total, used = gpu.get("total_bytes"), gpu.get("used_bytes")
        if total is None or used is None:
            continue
        card = card_of_row(gpu.get("name"), total)
        same = case.card is not None and card is not None and card.key == case.card.key
        findings.append(Finding("smi_gpu", {"index": gpu["index"], "used_bytes": used, "total_bytes": total,
                                            "free_bytes": total - used, "card": card.name if card else "—"}))
        if case.card is not None and not same:
            findings.append(Finding("smi_other_card", {"index": gpu["index"], "gpu": case.card.name}))
        if used >= GIB:  # a process the table lists is the reader's job unless they say otherwise
            listed = [p for p in figures.get("processes", []) if p.get("gpu") == gpu["index"]]
            if listed:
                advice.append(Finding("do_gpu_held_by", {"index": gpu["index"], "used_bytes": used,
                                                         "pids": ", ".join(str(p["pid"]) for p in listed)}))
            else:
                advice.append(Finding("do_free_gpu", {"index": gpu["index"], "used_bytes": used}))
    for process in figures.get("processes", []):
        findings.append(Finding("smi_process", {"index": process["gpu"], "pid": process["pid"],
                                                "used_bytes": process["used_bytes"]}))
    if not advice:
        advice.append(Finding("do_gpus_free"))
    return Comparison(tuple(findings), tuple(advice))


# ---------------------------------------------------------------- accelerate estimate-memory

def _accelerate(figures: dict, case: Case) -> Comparison:
    if case.model is None:
        return Comparison((Finding("no_case"),), (Finding("do_inference_overhead"),))
    names = {case.model.name.lower(), case.model.name.split("/")[-1].lower()}
    theirs = str(figures.get("model", "")).lower()
    if theirs and theirs not in names and theirs.split("/")[-1] not in names:
        return Comparison((Finding("accelerate_other_model", {"model": case.model.name}),),
                          (Finding("do_set_case"),))
    from calculator.memory.estimate import estimate_model

    dtypes = [row["dtype"] for row in figures["rows"] if row["dtype"] in ("float32", "float16", "bfloat16", "int8",
                                                                          "int4")]
    ours = {row.dtype: row for row in estimate_model(case.model, tuple(dtypes)).rows}
    findings = []
    for row in figures["rows"]:
        mine = ours.get(row["dtype"])
        if mine is None:
            continue
        code = "accelerate_matches" if close(row["total_bytes"], mine.total_bytes, 0.01) else "accelerate_differs"
        findings.append(Finding(code, {"dtype": row["dtype"], "log_bytes": row["total_bytes"],
                                       "calc_bytes": mine.total_bytes, "model": case.model.name}))
    return Comparison(tuple(findings), (Finding("do_inference_overhead"),))


# ---------------------------------------------------------------- torch.cuda.memory_summary()

def _memory_summary(figures: dict, case: Case) -> Comparison:
    findings, advice = [], []
    allocated, reserved = figures.get("allocated_peak_bytes"), figures.get("reserved_peak_bytes")
    if allocated is not None and reserved is not None:
        findings.append(Finding("summary_peaks", {"allocated_bytes": allocated, "reserved_bytes": reserved,
                                                  "gap_bytes": max(reserved - allocated, 0)}))
        if reserved - allocated >= max(reserved // 5, 256 * 2**20):
            advice.append(Finding("do_expandable_segments", {"gap_bytes": reserved - allocated}))
        if case.card is not None:
            smi = reserved + case.card.context_bytes
            findings.append(Finding("summary_on_card", {"smi_bytes": smi, "usable_bytes": case.card.usable_bytes,
                                                        "gpu": case.card.name}))
    elif allocated is not None:
        findings.append(Finding("summary_allocated", {"allocated_bytes": allocated}))
    if figures.get("malloc_retries"):
        advice.append(Finding("do_retries", {"retries": figures["malloc_retries"]}))
    if figures.get("cuda_ooms"):
        findings.append(Finding("summary_ooms", {"ooms": figures["cuda_ooms"]}))
    if not advice:
        advice.append(Finding("do_summary_ok"))
    return Comparison(tuple(findings), tuple(advice))


# ---------------------------------------------------------------- out-of-memory message

def _oom(figures: dict, case: Case) -> Comparison:
    findings = []
    card = card_for_total(figures["total"], "torch_total_mib")
    if case.card is not None:
        same = card is not None and card.key == case.card.key
        findings.append(Finding("oom_same_card" if same else "oom_other_card",
                                {"total_bytes": figures["total"], "gpu": case.card.name,
                                 "card": card.name if card else "—"}))
    return Comparison(tuple(findings), (Finding("do_oom_causes"),))


COMPARERS = {
    "vllm-log": _vllm,
    "sglang-log": _sglang,
    "nvidia-smi": _nvidia_smi,
    "accelerate-estimate": _accelerate,
    "memory-summary": _memory_summary,
    "oom-message": _oom,
}
