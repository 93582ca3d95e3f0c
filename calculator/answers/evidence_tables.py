"""Read the tables people paste: `nvidia-smi` (its box table and `--query-gpu ... --format=csv`),
`accelerate estimate-memory`'s table, and `torch.cuda.memory_summary()`.

Units as each tool writes them: nvidia-smi's MiB are 2^20 bytes. accelerate's convert_bytes
divides by 1024 and labels the result "MB", "GB", "TB" (accelerate/utils/other.py): its GB are
GiB. memory_summary's format_size writes B, KiB, MiB, GiB (torch/cuda/memory.py; before
PyTorch 2.0 the same binary sizes were labelled KB, MB, GB). Patterns are anchored and bounded;
lines are cut to a fixed length first.
"""

from __future__ import annotations

import csv
import io
import re

MAX_LINE = 1000
MAX_ROWS = 64  # GPUs, processes, dtypes: more rows than any machine prints are not read

_BINARY = {"B": 1, "bytes": 1, "KB": 2**10, "KiB": 2**10, "MB": 2**20, "MiB": 2**20, "GB": 2**30, "GiB": 2**30,
           "TB": 2**40, "TiB": 2**40, "PB": 2**50}
_SIZE = r"(\d{1,9}(?:\.\d{1,4})?)\s{0,2}(bytes|B|KiB|KB|MiB|MB|GiB|GB|TiB|TB|PB)"


def _lines(text: str) -> list[str]:
    return [line[:MAX_LINE] for line in text.splitlines()]


def _size(number: str, unit: str) -> int:
    return round(float(number) * _BINARY[unit])


# ---------------------------------------------------------------- nvidia-smi

_SMI_HEADER = re.compile(r"NVIDIA-SMI\s{1,6}([\d.]{1,20})\s{1,40}Driver Version:\s{0,4}([\d.]{1,20})"
                         r"(?:\s{1,40}CUDA Version:\s{0,4}([\d.]{1,10}))?")
# "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |   0 |"
_SMI_GPU = re.compile(r"^\|\s{1,6}(\d{1,3})\s{1,8}(\S(?:[^|]{0,60}?\S)?)\s{1,40}(On|Off)\s{0,6}\|")
_SMI_MEMORY = re.compile(r"\|\s{0,30}(\d{1,7})MiB\s{0,4}/\s{0,4}(\d{1,7})MiB\s{0,30}\|")
# "|    0   N/A  N/A    123456      C   python                          10240MiB |"
_SMI_PROCESS = re.compile(r"^\|\s{1,8}(\d{1,3})\s{1,8}(?:\S{1,4}\s{1,8}\S{1,4}\s{1,24})?(\d{1,10})\s{1,24}"
                          r"(C|G|C\+G|M|M\+C)\s{1,24}(\S[^|]{0,200}?)\s{1,80}(\d{1,7})MiB\s{0,4}\|")
_CSV_HEADER = re.compile(r"memory\.(?:total|used|free)")


def looks_like_nvidia_smi(text: str) -> bool:
    return "NVIDIA-SMI" in text or bool(_SMI_MEMORY.search(text)) or _csv_header(text) is not None


def _csv_header(text: str) -> str | None:
    for line in _lines(text)[:5]:
        if _CSV_HEADER.search(line) and "," in line:
            return line
    return None


def read_nvidia_smi(text: str) -> dict:
    """{driver_version, cuda_version, gpus: [{index, name, used_bytes, total_bytes}], processes:
    [{gpu, pid, name, used_bytes}]}; the CSV form gives the columns it was asked for."""
    if _csv_header(text) is not None and "NVIDIA-SMI" not in text:
        return _read_csv(text)
    out: dict = {"gpus": [], "processes": []}
    lines = _lines(text)
    for line in lines:
        header = _SMI_HEADER.search(line)
        if header:
            out["driver_version"] = header.group(2)
            if header.group(3):
                out["cuda_version"] = header.group(3)
            break
    in_processes, pending = False, None
    for line in lines:
        if "Processes:" in line:
            in_processes = True
            continue
        if in_processes:
            found = _SMI_PROCESS.search(line)
            if found and len(out["processes"]) < MAX_ROWS:
                gpu, pid, _, name, used = found.groups()
                out["processes"].append({"gpu": int(gpu), "pid": int(pid), "name": name[:80],
                                         "used_bytes": int(used) * 2**20})
            continue
        gpu = _SMI_GPU.search(line)
        if gpu:
            pending = {"index": int(gpu.group(1)), "name": gpu.group(2).strip()[:80]}
            continue
        memory = _SMI_MEMORY.search(line)
        if memory and pending is not None and len(out["gpus"]) < MAX_ROWS:
            pending.update(used_bytes=int(memory.group(1)) * 2**20, total_bytes=int(memory.group(2)) * 2**20)
            out["gpus"].append(pending)
            pending = None
    return out


_CSV_COLUMNS = {"index": "index", "name": "name", "memory.total": "total_bytes", "memory.used": "used_bytes",
                "memory.free": "free_bytes"}


def _read_csv(text: str) -> dict:
    lines = [line for line in _lines(text) if line.strip()]
    start = next(i for i, line in enumerate(lines) if _CSV_HEADER.search(line))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:start + MAX_ROWS + 1])), skipinitialspace=True))
    names = [cell.split("[")[0].strip() for cell in rows[0]]
    gpus = []
    for position, row in enumerate(rows[1:]):
        if len(row) != len(names):
            continue
        gpu: dict = {"index": position}
        for name, cell in zip(names, row):
            key = _CSV_COLUMNS.get(name)
            if key == "name":
                gpu["name"] = cell.strip()[:80]
            elif key == "index" and cell.strip().isdigit():
                gpu["index"] = int(cell)
            elif key:
                found = re.fullmatch(r"\s{0,4}(\d{1,9})\s{0,2}(MiB)?\s{0,4}", cell)
                if found:
                    gpu[key] = int(found.group(1)) * 2**20  # --format=csv,nounits keeps MiB
        if len(gpu) > 1:
            gpus.append(gpu)
    return {"gpus": gpus, "processes": [], "format": "csv"}


# ---------------------------------------------------------------- accelerate estimate-memory

_ACCELERATE_TITLE = re.compile(r"Memory Usage for loading `([^`]{1,200})`")
_ACCELERATE_ROW = re.compile(r"^\s{0,4}[|│]\s{0,20}(float32|float16|bfloat16|int8|int4)\s{0,20}[|│]\s{0,20}"
                             + _SIZE + r"\s{0,20}[|│]\s{0,20}" + _SIZE + r"\s{0,20}[|│]\s{0,20}(?:" + _SIZE
                             + r"|N/A)\s{0,20}[|│]")


def looks_like_accelerate(text: str) -> bool:
    return "Memory Usage for loading" in text or ("Largest Layer" in text and "Training using Adam" in text)


def read_accelerate(text: str) -> dict:
    """{model, rows: [{dtype, largest_layer_bytes, total_bytes, training_adam_bytes}]}."""
    out: dict = {"rows": []}
    title = _ACCELERATE_TITLE.search(text)
    if title:
        out["model"] = title.group(1)
    for line in _lines(text):
        found = _ACCELERATE_ROW.search(line)
        if found and len(out["rows"]) < MAX_ROWS:
            g = found.groups()
            out["rows"].append({"dtype": g[0], "largest_layer_bytes": _size(g[1], g[2]),
                                "total_bytes": _size(g[3], g[4]),
                                "training_adam_bytes": _size(g[5], g[6]) if g[5] else None})
    return out


# ---------------------------------------------------------------- torch.cuda.memory_summary()

_SUMMARY_TITLE = re.compile(r"PyTorch CUDA memory summary, device ID (\d{1,3})")
_SUMMARY_COUNTS = re.compile(r"CUDA OOMs: (\d{1,9})\s{0,40}\|\s{0,40}cudaMalloc retries: (\d{1,9})")
_SUMMARY_ROW = re.compile(r"^\|\s{0,4}(Allocated memory|Active memory|Requested memory|GPU reserved memory|"
                          r"Non-releasable memory)\s{0,30}\|\s{0,20}" + _SIZE + r"\s{0,20}\|\s{0,20}" + _SIZE
                          + r"\s{0,20}\|")
_SUMMARY_KEYS = {"Allocated memory": "allocated", "Active memory": "active", "Requested memory": "requested",
                 "GPU reserved memory": "reserved", "Non-releasable memory": "non_releasable"}


def looks_like_memory_summary(text: str) -> bool:
    return "PyTorch CUDA memory summary" in text or ("GPU reserved memory" in text and "Allocated memory" in text)


def read_memory_summary(text: str) -> dict:
    """{device, cuda_ooms, malloc_retries, <row>_current_bytes, <row>_peak_bytes} for the rows
    allocated, active, requested, reserved and non_releasable (the "all" line of each)."""
    out: dict = {}
    title = _SUMMARY_TITLE.search(text)
    if title:
        out["device"] = int(title.group(1))
    counts = _SUMMARY_COUNTS.search(text)
    if counts:
        out.update(cuda_ooms=int(counts.group(1)), malloc_retries=int(counts.group(2)))
    for line in _lines(text):
        found = _SUMMARY_ROW.search(line)
        if found:
            key = _SUMMARY_KEYS[found.group(1)]
            out.setdefault(f"{key}_current_bytes", _size(found.group(2), found.group(3)))
            out.setdefault(f"{key}_peak_bytes", _size(found.group(4), found.group(5)))
    return out
