"""Read the start-up logs of the serving engines: what vLLM and SGLang say about the memory they
took (weights, KV cache, CUDA graphs) and the sequences the KV cache holds.

Lines read (vLLM, checked against vllm/v1/worker/gpu_model_runner.py, v1/core/kv_cache_utils.py
and v1/worker/gpu_worker.py, and the V0 worker before them):
  "Model loading took 12.66 GiB memory and 31.65 seconds"        (V1; older: "took 2.2845 GiB and")
  "Loading model weights took 14.9888 GB"                          (V0: GiB, labelled GB)
  "Available KV cache memory: 8.11 GiB"                            (V1)
  "Memory profiling results: total_gpu_memory=23.58GiB ... kv_cache_size=3.81GiB
   gpu_memory_utilization=0.90"                                    (V0)
  "GPU KV cache size: 2,042,016 tokens"  /  "# GPU blocks: 1381"
  "Maximum concurrency for 2,048 tokens per request: 997.08x"
  "Graph capturing finished in 5 secs, took 0.53 GiB"  /  "CUDA graph takes 0.49 GiB"
  "non-default args: {... 'gpu_memory_utilization': 0.8, 'max_model_len': 8192, ...}"
SGLang (sglang/srt/model_executor/model_runner.py, cuda_graph_runner.py; its "GB" is 2^30 bytes:
get_available_gpu_memory divides by 1 << 30):
  "Load weight begin. avail mem=137.29 GB" / "Load weight end. ... avail mem=79.3 GB, mem usage=56.98 GB."
  "KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB"
  "Capture cuda graph end. Time elapsed: 5.92 s. mem usage=1.44 GB. avail mem=37.06 GB."
  "max_total_num_tokens=2261377, ..., max_running_requests=4096, context_len=128000, available_gpu_mem=37.06 GB"
Every pattern is anchored on fixed words and has bounded repeats; each line is cut to a fixed
length before it is read, so no input makes them slow.
"""

from __future__ import annotations

from calculator.core.units import GIB
import re

MAX_LINE = 4000  # a log line longer than this is cut: the figures sit in its first words

_NUM = r"(\d{1,9}(?:\.\d{1,6})?)"
_COUNT = r"(\d{1,3}(?:,\d{3}){1,4}|\d{1,15})"  # 2,042,016 or 2042016
_UNIT = r"\s{0,2}(GiB|GB|MiB|MB)"
_UNITS = {"GiB": GIB, "GB": GIB, "MiB": 2**20, "MB": 2**20}  # both engines write GiB as "GB"

VLLM_PATTERNS = {
    "weights_bytes": re.compile(r"(?:Model loading took|Loading model weights took) " + _NUM + _UNIT),
    "available_kv_bytes": re.compile(r"Available KV cache memory: " + _NUM + _UNIT),
    "v0_kv_cache_bytes": re.compile(r"kv_cache_size=" + _NUM + _UNIT),
    "total_gpu_bytes": re.compile(r"total_gpu_memory=" + _NUM + _UNIT),
    "kv_tokens": re.compile(r"GPU KV cache size: " + _COUNT + r" tokens"),
    "kv_blocks": re.compile(r"(?:# )?GPU blocks: " + _COUNT),
    "concurrency": re.compile(r"Maximum concurrency for " + _COUNT + r" tokens per request: " + _NUM + r"x"),
    "cuda_graph_bytes": re.compile(r"(?:Graph capturing finished in \d{1,6} secs?, took|CUDA graph takes) "
                                   + _NUM + _UNIT),
    "utilization": re.compile(r"gpu[_-]memory[_-]utilization['\"]?\s{0,2}[:=]?\s{0,2}(0?\.\d{1,4}|1(?:\.0{1,4})?)\b"),
    "max_model_len": re.compile(r"(?:'max_model_len'|max_seq_len|--max-model-len)['\"]?\s{0,2}[:=]?\s{0,2}(\d{1,9})"),
    "tensor_parallel": re.compile(r"(?:'tensor_parallel_size'|tensor_parallel_size|--tensor-parallel-size)"
                                  r"['\"]?\s{0,2}[:=]?\s{0,2}(\d{1,4})"),
    "kv_cache_dtype": re.compile(r"'?kv_cache_dtype'?\s{0,2}[:=]\s{0,2}'?([a-z0-9_]{1,16})"),
    "block_size": re.compile(r"'block_size'\s{0,2}:\s{0,2}(\d{1,5})|--block-size\s{1,3}(\d{1,5})"),
    "version": re.compile(r"(?:vLLM API server version|LLM engine \(v)\s{0,2}(\d{1,3}\.\d{1,3}(?:\.\d{1,4})?)"),
}

SGLANG_PATTERNS = {
    "free_before_weights_bytes": re.compile(r"Load weight begin\. avail mem=" + _NUM + _UNIT),
    "weights_bytes": re.compile(r"Load weight end\..{0,300}?mem usage=" + _NUM + _UNIT),
    "kv": re.compile(r"KV Cache is allocated\..{0,80}?#tokens: (\d{1,12}), K size: " + _NUM + _UNIT
                     + r", V size: " + _NUM + _UNIT),
    "cuda_graph": re.compile(r"Capture cuda graph end\..{0,60}?mem usage=" + _NUM + _UNIT
                             + r"\.\s{0,2}avail mem=" + _NUM + _UNIT),
    "summary": re.compile(r"max_total_num_tokens=(\d{1,12}),.{0,200}?max_running_requests=(\d{1,9}),"
                          r".{0,60}?context_len=(\d{1,9})"),
    "fraction": re.compile(r"mem[_-]fraction[_-]static['\"]?\s{0,2}[=:\s]\s{0,2}(0?\.\d{1,4}|1(?:\.0{1,4})?)\b"),
    "tensor_parallel": re.compile(r"(?:\btp_size|--tp-size|--tp)['\"]?\s{0,2}[=:\s]\s{0,2}(\d{1,4})"),
}

VLLM_MARKERS = ("GPU KV cache size:", "GPU blocks:", "Maximum concurrency for", "Available KV cache memory:",
                "Model loading took", "Loading model weights took")
SGLANG_MARKERS = ("KV Cache is allocated.", "max_total_num_tokens=", "Load weight end.", "Capture cuda graph end.")


def _lines(text: str) -> list[str]:
    return [line[:MAX_LINE] for line in text.splitlines()]


def _size(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def _last(pattern: re.Pattern, lines: list[str]) -> re.Match | None:
    """The last line's match: a log of several starts describes the last one (tensor-parallel
    ranks print the same figures)."""
    for line in reversed(lines):
        found = pattern.search(line)
        if found:
            return found
    return None


def read_vllm(text: str) -> dict:
    """A vLLM start-up log's figures (bytes, tokens); keys the log does not give are absent."""
    lines, p, out = _lines(text), VLLM_PATTERNS, {}
    for key in ("weights_bytes", "available_kv_bytes", "total_gpu_bytes", "cuda_graph_bytes"):
        found = _last(p[key], lines)
        if found:
            out[key] = _size(*found.groups())
    found = _last(p["v0_kv_cache_bytes"], lines)
    if found and "available_kv_bytes" not in out:
        out["available_kv_bytes"] = _size(*found.groups())
    found = _last(p["block_size"], lines)
    block = _count(next(g for g in found.groups() if g)) if found else None
    found = _last(p["kv_blocks"], lines)
    if found:
        out["kv_blocks"] = _count(found.group(1))
    found = _last(p["kv_tokens"], lines)
    if found:
        out["kv_tokens"] = _count(found.group(1))
    elif "kv_blocks" in out:
        out["block_tokens"] = block or 16  # vLLM's default block on CUDA
        out["kv_tokens"] = out["kv_blocks"] * out["block_tokens"]
    found = _last(p["concurrency"], lines)
    if found:
        out["concurrency_context"] = _count(found.group(1))
        out["max_concurrency"] = float(found.group(2))
    for key in ("max_model_len", "tensor_parallel"):
        found = _last(p[key], lines)
        if found:
            out[key] = int(found.group(1))
    found = _last(p["utilization"], lines)
    if found:
        out["gpu_memory_utilization"] = float(found.group(1))
    found = _last(p["kv_cache_dtype"], lines)
    if found:
        out["kv_cache_dtype"] = found.group(1)
    found = _last(p["version"], lines)
    if found:
        out["engine_version"] = found.group(1)
    if "max_model_len" not in out and "concurrency_context" in out:
        out["max_model_len"] = out["concurrency_context"]
    return out


def read_sglang(text: str) -> dict:
    """An SGLang start-up log's figures (bytes, tokens); keys the log does not give are absent."""
    lines, p, out = _lines(text), SGLANG_PATTERNS, {}
    for key in ("free_before_weights_bytes", "weights_bytes"):
        found = _last(p[key], lines)
        if found:
            out[key] = _size(*found.groups())
    found = _last(p["kv"], lines)
    if found:
        tokens, k, k_unit, v, v_unit = found.groups()
        out.update(kv_tokens=int(tokens), kv_cache_bytes=_size(k, k_unit) + _size(v, v_unit))
    found = _last(p["cuda_graph"], lines)
    if found:
        out.update(cuda_graph_bytes=_size(*found.group(1, 2)), free_after_start_bytes=_size(*found.group(3, 4)))
    found = _last(p["summary"], lines)
    if found:
        out.update(kv_tokens=int(found.group(1)), max_running_requests=int(found.group(2)),
                   max_model_len=int(found.group(3)))
        out["max_concurrency"] = round(out["kv_tokens"] / out["max_model_len"], 2) if out["max_model_len"] else 0.0
    found = _last(p["fraction"], lines)
    if found:
        out["mem_fraction_static"] = float(found.group(1))
    found = _last(p["tensor_parallel"], lines)
    if found:
        out["tensor_parallel"] = int(found.group(1))
    return out


def looks_like_vllm(text: str) -> bool:
    return any(marker in text for marker in VLLM_MARKERS)


def looks_like_sglang(text: str) -> bool:
    return any(marker in text for marker in SGLANG_MARKERS)
