"""A card the catalog does not have, described by the reader: its memory as nvidia-smi shows
it and, optionally, its bandwidth.

Spelling (CLI `--gpu`, URL `gpu=`, the case bar): `custom:12GiB`, `custom:12GiB:360GB/s`, or the
size alone (`12GiB`, `24GB`, `16384MiB`). GB is 10^9 bytes, GiB 2^30 (DESIGN.md, Units). The
card's key is the canonical spelling (`custom:12GiB:360GB/s`), so it round-trips through a link.
What the reader did not say is taken from the catalog: PyTorch's total is the size less the
driver reservation of the architecture of the catalog card nearest in memory (gpus.reservation_mib),
and that card lends its compute throughput, interconnect and (unless typed) bandwidth.
"""

from __future__ import annotations

from dataclasses import replace
import re

from calculator.core.errors import CalculatorError

SIZE_UNITS = {"gib": 2**30, "gb": 10**9, "mib": 2**20}
MIN_BYTES, MAX_BYTES = 2**30, 4 * 2**40  # 1 GiB to 4 TiB
MAX_BANDWIDTH_GBS = 100_000.0
_NUMBER = r"(\d{1,12}(?:\.\d{1,3})?)"
_SIZE = re.compile(_NUMBER + r"\s*(gib|gb|mib)", re.IGNORECASE)
_BANDWIDTH = re.compile(_NUMBER + r"\s*(?:gb/s|gbps|gbs|gb)?", re.IGNORECASE)
LENDING_GROUPS = ("data-centre", "workstation", "consumer")  # NVIDIA cards lend their speeds


def is_custom(text: str) -> bool:
    """Whether the text describes a card by its memory rather than naming one."""
    text = text.strip().lower()
    return text.startswith("custom:") or bool(_SIZE.fullmatch(text))


def custom_gpu(text: str, cards, reservation_mib):
    """The card `text` describes, or CalculatorError("bad_custom_gpu") in the reader's terms.
    `cards`: the catalog's cards (it lends its speeds); `reservation_mib(card)`: what the driver
    keeps of such a card's total (both from calculator/core/gpus.py, which calls this)."""
    size_bytes, bandwidth = parse_custom(text)
    memory_mib = max(1, size_bytes // 2**20)
    lender = min((c for c in cards if c.group in LENDING_GROUPS),
                 key=lambda c: (abs(c.memory_mib - memory_mib), c.memory_mib))
    key = custom_key(size_bytes, bandwidth)
    reserved = reservation_mib(lender)
    return replace(lender, key=key, name=f"GPU {key}", nominal=key.removeprefix("custom:"),
                   memory_mib=memory_mib, torch_total_mib=max(1, memory_mib - reserved),
                   bandwidth_gbs=bandwidth or lender.bandwidth_gbs, group="custom", total_basis="custom",
                   total_source=f"Typed by the reader (nvidia-smi's total); PyTorch's total: less {reserved} MiB, "
                                f"the median driver reservation on {lender.architecture} cards",
                   source=f"Compute, interconnect{'' if bandwidth else ' and bandwidth'} of the nearest catalog card "
                          f"in memory, {lender.name}")


def parse_custom(text: str) -> tuple[int, float | None]:
    """(bytes, GB/s or None) from `custom:SIZE[:BANDWIDTH]` or `SIZE`."""
    raw = str(text).strip()
    body = raw[len("custom:"):] if raw.lower().startswith("custom:") else raw
    parts = body.split(":")
    size = _SIZE.fullmatch(parts[0].strip()) if len(parts) <= 2 else None
    if size is None:
        raise CalculatorError("bad_custom_gpu", gpu=raw[:40])
    size_bytes = int(float(size.group(1)) * SIZE_UNITS[size.group(2).lower()])
    bandwidth = None
    if len(parts) == 2:
        match = _BANDWIDTH.fullmatch(parts[1].strip())
        bandwidth = float(match.group(1)) if match else -1.0
        if not 1.0 <= bandwidth <= MAX_BANDWIDTH_GBS:
            raise CalculatorError("bad_custom_gpu", gpu=raw[:40])
    if not MIN_BYTES <= size_bytes <= MAX_BYTES:
        raise CalculatorError("bad_custom_gpu", gpu=raw[:40])
    return size_bytes, bandwidth


def custom_key(size_bytes: int, bandwidth: float | None) -> str:
    """The canonical spelling: whole GiB where the size is one, else MiB; GB/s without a
    trailing .0."""
    size = f"{size_bytes // 2**30}GiB" if size_bytes % 2**30 == 0 else f"{size_bytes // 2**20}MiB"
    if bandwidth is None:
        return f"custom:{size}"
    return f"custom:{size}:{bandwidth:g}GB/s"
