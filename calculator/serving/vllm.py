"""vLLM's own accounting beyond the KV cache pages and the weights (engines.py): its versions and
their default share, the CUDA graphs' estimate, the non-torch memory, the scheduler's default
limits and the torch peak of its profile run. Sources: see engines.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

from calculator.core.errors import CalculatorError
from calculator.models.architecture import ArchSpec
from calculator.serving.engines import compute_bytes, kv_heads_per_gpu
from calculator.core.units import GIB

# vLLM's accounting: the current one by default, 0.19's (the release of the published logs
# bench/data/serving_logs.json compares against) on request. What changed in between, read in
# the source: --gpu-memory-utilization defaults to 0.92 (config/cache.py, `Field(default=0.92)`,
# 0.9 before), and the CUDA graphs' memory is estimated during the profile run and taken out of
# the pool (gpu_worker.py determine_available_memory: available = requested - non_kv_cache_memory
# - cudagraph_memory_estimate_applied; "CUDA graph memory profiling is enabled (default since
# v0.21.0)"), where 0.19 captured them afterwards in the 1 - util left over.
VLLM_CURRENT = "0.33"
VLLM_VERSIONS = ("0.19", VLLM_CURRENT)
VLLM_VERSION = VLLM_CURRENT
VLLM_UTILIZATIONS = {"0.19": 0.9, VLLM_CURRENT: 0.92}
VLLM_UTILIZATION = VLLM_UTILIZATIONS[VLLM_CURRENT]
# Measured, not derived: vLLM's "Estimated CUDA graph memory: X GiB total" with its default
# capture sizes (51 piecewise up to 512, 35 full up to 256) on one GPU for an 8B model: 0.52 GiB
# (LMCache#3430, vLLM 0.21.0, Qwen3-8B on an RTX A5000). Other published estimates: 0.13 to
# 0.58 GiB (smaller capture sizes, TP2 to TP4), 2.2 GiB (a MoE with a draft model, TP4), 4.3 GiB
# (an FP4 model, TP2): bench/data/serving_logs_current.json. --enforce-eager captures none.
# Not modelled: on the published vLLM 0.28-0.29 starts with vLLM's default limits, vLLM keeps
# 0.47 GiB (L40S) and about 1.0 GiB (RTX 5090) more outside the cache than this accounting,
# in bfloat16 and quantized alike (`reported_gap` in that file). On the L40S, and in the torch
# peak the 0.26 RTX 4080 log prints (1.04 GiB for our 0.56), the excess is the sampler's buffers
# a second time (13 x 256 sequences x vocabulary = 0.47 GiB); not priced, since the 0.21 RTX
# A5000 and 0.26 RTX PRO 6000 starts leave no room for it and the RTX 5090 pair misses twice as
# much (tests/test_serving_current.py, term by term). A lead, not confirmed per version: the
# RTX 4080 run set VLLM_USE_FLASHINFER_SAMPLER=0, and vLLM's PyTorch-native top-k/top-p
# (v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p) holds at its peak the float32 logits,
# their sorted copy, int64 indices, probabilities, two masks and the scattered result: about
# 26 bytes a logit, twice the 13 fitted on 0.19; which sampler each version runs by default
# (FlashInfer off by default from vllm#26859, on again from vllm#40376) was not followed.
CUDA_GRAPH_BYTES = round(0.5 * GIB)

# Measured, not derived (vLLM 0.19 startup logs on H100, bench/data/serving_logs.json):
# - the non-torch memory that grows during the profile run: attention-backend workspaces on
#   one GPU (0.24 to 0.27 GiB), plus NCCL and custom all-reduce buffers with tensor
#   parallelism (2.06 to 2.21 GiB). The engine measures it with cudaMemGetInfo; nothing in a
#   config predicts it.
NON_TORCH_BYTES_ONE_GPU = round(0.25 * GIB)
NON_TORCH_BYTES_TENSOR_PARALLEL = round(2.1 * GIB)
# - the sampler's warm-up in the profile run: the logits of min(max_num_batched_tokens,
#   max_num_seqs) rows, then their float32 copy and the top-k/top-p work buffers. Beyond the
#   logits themselves this holds 12.7 to 13.1 bytes per logit in the logs (vocabularies of
#   51k to 256k, bfloat16 and float32): 13, fitted on one development row
#   (Llama-3.1-8B, bfloat16) and checked on the others.
SAMPLER_BYTES_PER_LOGIT = 13

# vLLM's scheduler limits when the user sets none (engine/arg_utils.py
# EngineArgs.get_batch_defaults): cards whose total memory is 70 GiB or more, other than the
# A100 (PR #17885: larger steps slowed it down), get larger ones; `vllm serve` (the OpenAI
# server's usage context) and the offline `LLM` class differ in the tokens per step.
# (max_num_batched_tokens, max_num_seqs) by (usage context, big card):
BIG_CARD_BYTES = 70 * GIB
USAGES = ("server", "offline")
DEFAULT_LIMITS = {("server", True): (8192, 1024), ("server", False): (2048, 256),
                  ("offline", True): (16384, 1024), ("offline", False): (8192, 256)}


def cuda_graph_bytes(version: str, enforce_eager: bool) -> int:
    """What vLLM takes out of the pool for its CUDA graphs: nothing in 0.19 (they were captured
    after the pool, in the memory the share leaves), nothing with --enforce-eager."""
    return 0 if version == "0.19" or enforce_eager else CUDA_GRAPH_BYTES


def default_limits(total_bytes: int, gpu_key: str = "", usage: str = "server") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM picks on this card when none is given:
    the one place the serving chapter's calculators and `serve` take them from."""
    if usage not in USAGES:
        raise CalculatorError("unknown_choice", name="usage context", value=str(usage)[:30], choices=", ".join(USAGES))
    big = total_bytes >= BIG_CARD_BYTES and "a100" not in gpu_key
    return DEFAULT_LIMITS[(usage, big)]


# -- the profile run --------------------------------------------------------------------------

@dataclass(frozen=True)
class Profile:
    """The torch peak of vLLM's profile run, and what sets it."""

    peak_bytes: int
    moment: str  # "sampler" or "forward"
    forward_bytes: int
    sampler_bytes: int
    experts_bytes: int  # the fused-MoE kernel's buffers (in both moments)


def profile_peak(spec: ArchSpec, dtype: str, tensor: int, batched_tokens: int, max_seqs: int) -> Profile:
    """vLLM's profile run (gpu_model_runner.profile_run): a forward of max_num_batched_tokens
    tokens without a cache, split into min(tokens, max_num_seqs) requests, then the sampler
    over one row per request. Forward: the hidden states and the residual, with the widest
    moment of a layer (its query/key/value and attention output, or the MLP's widening:
    gate and up, then their product). Sampler: the forward's last hidden states, the logits
    of each request and the sampler's buffers (SAMPLER_BYTES_PER_LOGIT). Mixture-of-experts
    layers add the fused-MoE kernel's three buffers for tokens x top-k routed rows; the
    logged peaks (Qwen3-30B-A3B, Mixtral, DeepSeek-V2-Lite) are matched only when these are
    counted in the sampler's moment too, so they are: we did not find the line that keeps
    them, and say so."""
    t, a, h = tensor, compute_bytes(dtype), spec.hidden
    tokens, rows = batched_tokens, min(batched_tokens, max_seqs)
    hidden = tokens * h * a
    heads, d = spec.heads // t, spec.head_dim
    attention = tokens * (2 * heads + 2 * kv_heads_per_gpu(spec, t)) * d * a
    if spec.experts:
        width = spec.expert_intermediate // t
        experts = tokens * spec.experts_per_token * (3 * width + h) * a
        shared = 3 * tokens * (spec.shared_expert_intermediate // t) * a
        mlp = experts + shared
    else:
        experts = 0
        mlp = tokens * (3 if spec.gated_mlp else 2) * (spec.intermediate // t) * a
    forward = 2 * hidden + max(attention, mlp)
    sampler = hidden + rows * h * a + rows * spec.vocab * (a + SAMPLER_BYTES_PER_LOGIT) + experts
    moment = "sampler" if sampler >= forward else "forward"
    return Profile(max(forward, sampler), moment, forward, sampler, experts)


def non_torch_bytes(tensor: int) -> int:
    return NON_TORCH_BYTES_TENSOR_PARALLEL if tensor > 1 else NON_TORCH_BYTES_ONE_GPU
