"""Measure memory on the CPU: a tracker of live tensor bytes (a TorchDispatchMode).

Every tensor an operator returns is counted while any Python reference to a tensor sharing
its storage is alive; views count once. Storages that existed before the block (weights,
inputs) are never counted, even when an operator returns a view of them: `linear` hands
the transposed weight to the matrix product as such a view. The peak is the largest sum
seen. What this cannot see: buffers a kernel allocates and frees inside itself (the
workspace of a fused attention kernel, of a BLAS call), and everything an allocator adds
(CUDA's caching allocator rounds blocks and keeps freed ones). On a CUDA GPU use
torch.cuda.max_memory_allocated() instead; this exists so the same checks run everywhere.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _storage_key(tensor: object) -> int:
    if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
        return tensor.untyped_storage().data_ptr()
    return 0


class LiveBytes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._refs: dict[int, list[int]] = {}  # storage pointer -> [bytes, live tensors]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {_storage_key(t) for t in tree_flatten((args, kwargs))[0]}
        for tensor in tree_flatten(out)[0]:
            key = _storage_key(tensor)
            # a view of (or an in-place write to) a storage from before the block: not ours
            if key and (key in self._refs or key not in inputs):
                self._track(tensor, key)
        return out

    def _track(self, tensor: torch.Tensor, key: int) -> None:
        entry = self._refs.get(key)
        if entry is None:
            entry = self._refs[key] = [tensor.untyped_storage().nbytes(), 0]
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


def cache_tensor_bytes(cache) -> int:
    """Bytes of the keys and values a transformers cache holds (what it exposes, not the
    storage behind a view)."""
    if cache is None:
        return 0
    layers = list(getattr(cache, "layers", []))
    if hasattr(cache, "self_attention_cache"):
        layers = list(cache.self_attention_cache.layers) + list(cache.cross_attention_cache.layers)
    return sum(t.numel() * t.element_size() for layer in layers for t in (layer.keys, layer.values)
               if isinstance(t, torch.Tensor))


def measure_inference(model, batch: int, tokens: int, mode: str = "generate") -> tuple[int, int]:
    """(peak live bytes, cache bytes) of the run the calculator models, on the CPU:
    generate: model.generate on `tokens` dummy tokens with an attention mask, as a tokenizer
    gives, for one new token (the prefill: the peak of a generation), greedy;
    loglikelihood: model(ids, attention_mask=...) then the float32 log-probabilities of every
    position and the log-likelihood of the tokens, as an evaluation computes them.
    Encoder-decoder models read `tokens` tokens and, for a log-likelihood, score `tokens` tokens.
    Inputs are made before measuring, as a data loader would; weights are never counted."""
    config = model.config
    torch.manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch, tokens))
    mask = torch.ones_like(ids)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    tracker = LiveBytes()
    with torch.inference_mode(), tracker:
        if mode == "generate":
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=1, do_sample=False,
                                 num_beams=1, pad_token_id=0, return_dict_in_generate=True)
            cache = out.past_key_values
        else:
            extra = {"decoder_input_ids": ids} if seq2seq else {}
            out = model(input_ids=ids, attention_mask=mask, **extra)
            logprobs = torch.log_softmax(out.logits.float(), dim=-1)
            nll = -logprobs[:, :-1].gather(-1, ids[:, 1:, None]).sum()
            cache = out.past_key_values
            del logprobs, nll
        cached = cache_tensor_bytes(cache)
        del out, cache
    return tracker.peak, cached
