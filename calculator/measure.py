"""Measure memory on the CPU: a tracker of live tensor bytes (a TorchDispatchMode).

Every tensor an operator returns is counted while any Python reference to a tensor sharing
its storage is alive; views count once. The peak is the largest sum seen. On a CUDA GPU use
torch.cuda.max_memory_allocated() instead; this exists so the same checks run everywhere.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveBytes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._refs: dict[int, list[int]] = {}  # storage pointer -> [bytes, live tensors]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                self._track(tensor)
        return out

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key == 0:
            return
        entry = self._refs.get(key)
        if entry is None:
            entry = self._refs[key] = [storage.nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(tensor, self._release, key)

    def _release(self, key: int) -> None:
        entry = self._refs.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._refs[key]

    def count(self, tensors) -> None:
        """Count tensors created before the block (a model's weights) as live."""
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                self._track(tensor)

    def reset_peak(self) -> None:
        """Start a new peak from what is live now (one training step after another)."""
        self.peak = self.current

    def retained(self) -> int:
        """Bytes still held by tensors created inside the block (outputs, caches)."""
        return self.current


def tensor_bytes(module: torch.nn.Module) -> int:
    tensors = list(module.parameters()) + list(module.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)
