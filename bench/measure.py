"""Measure memory on the CPU: a tracker of live tensor bytes (a TorchDispatchMode).

Every tensor an operator returns is counted while any Python reference to a tensor sharing
its storage is alive; views count once. Storages that existed before the block (weights,
inputs) are never counted, even when an operator returns a view of them: `linear` hands
the transposed weight to the matrix product as such a view. The peak is the largest sum
seen. What this cannot see: buffers a kernel allocates and frees inside itself (the
workspace of a fused attention kernel, of a BLAS call), and everything an allocator adds
(CUDA's caching allocator rounds blocks and keeps freed ones). On a CUDA GPU use
torch.cuda.max_memory_allocated() instead; this exists so the same checks run everywhere.

Also here: the runs the calculator's figures describe (an inference mode, one training step
of a TrainingSetup) on real models with random weights, and two meters that answer the same
questions (bytes held now, peak since a reset) with LiveBytes on the CPU and with the CUDA
caching allocator's statistics on a GPU. bench/activations.py, bench/training.py and
bench/accuracy.py measure with them.
"""

from __future__ import annotations

import contextlib
import gc
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
        self._refs: dict[int, int] = {}  # storage pointer -> bytes, while the storage lives

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
        # One entry per storage, released when the storage itself dies: a Parameter wraps
        # the tensor an operator returned in a new tensor object that shares its storage,
        # and autograd keeps tensors alive with no Python object at all.
        if key in self._refs:
            return
        storage = tensor.untyped_storage()
        self._refs[key] = storage.nbytes()
        self.current += self._refs[key]
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._release, key)

    def _release(self, key: int) -> None:
        size = self._refs.pop(key, None)
        if size is not None:
            self.current -= size

    def count(self, tensors) -> None:
        """Count tensors created before the block (a model's weights) as live."""
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                self._track(tensor, _storage_key(tensor))

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


def dummy_inputs(model, batch: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and a full attention mask, as a tokenizer gives, on the model's device."""
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (batch, tokens)).to(model.device)
    return ids, torch.ones_like(ids)


def run_inference(model, ids: torch.Tensor, mask: torch.Tensor, mode: str = "generate",
                  new_tokens: int = 1) -> int:
    """Run the model as the calculator's inference mode defines it; return the bytes of the
    cache it leaves. generate: model.generate, greedy, for `new_tokens` new tokens (one: the
    prefill, the peak of a decoder's generation; an encoder-decoder's decoder runs as many
    steps as the context to fill its cache as the calculator counts it); loglikelihood:
    model(ids, attention_mask=...) then the float32 log-probabilities of every position and
    the log-likelihood of the tokens, as an evaluation computes them (an encoder-decoder
    scores as many tokens as it reads). Everything it makes is released before it returns."""
    seq2seq = bool(getattr(model.config, "is_encoder_decoder", False))
    with torch.inference_mode():
        if mode == "generate":
            # min_new_tokens adds a logits processor with tensors of its own: only when needed
            longer = {"min_new_tokens": new_tokens} if new_tokens > 1 else {}
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                                 num_beams=1, pad_token_id=0, return_dict_in_generate=True, **longer)
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
    return cached


def measure_inference(model, batch: int, tokens: int, mode: str = "generate",
                      new_tokens: int = 1) -> tuple[int, int]:
    """(peak live bytes, cache bytes) of run_inference on the CPU. Inputs are made before
    measuring, as a data loader would; weights are never counted."""
    ids, mask = dummy_inputs(model, batch, tokens)
    tracker = LiveBytes()
    with tracker:
        cached = run_inference(model, ids, mask, mode, new_tokens)
    return tracker.peak, cached


# -- real models with random weights, and one training step --------------------------------

def random_model(config: dict, dtype: str = "float32", attention: str = "sdpa", device: str = "cpu"):
    """The model of a config dict (its `architectures` class) with random weights, in `dtype`,
    created directly on `device` (on a GPU nothing passes through the CPU), running the
    attention transformers itself would run (eager for models without an SDPA path)."""
    import transformers

    from calculator.models.architecture import spec_from_config
    from calculator.models.meta import make_config

    cfg = make_config(config)
    if not spec_from_config(cfg).sdpa:
        attention = "eager"
    torch.manual_seed(0)
    with torch.device(device):
        return getattr(transformers, config["architectures"][0])._from_config(
            cfg, dtype=getattr(torch, dtype), attn_implementation=attention)


def training_dtype(setup) -> str:
    """The dtype the weights are stored in for a TrainingSetup's precision (amp: float32
    weights, products in bfloat16 under autocast). "mixed" (16-bit weights with a float32
    master copy) needs a framework such as DeepSpeed, so it is not run here."""
    if setup.precision == "mixed":
        raise ValueError("mixed precision with a float32 master copy is not a plain PyTorch recipe")
    return "bfloat16" if setup.precision == "bfloat16" else "float32"


def make_optimizer(params, setup) -> torch.optim.Optimizer:
    foreach, fused = setup.optimizer_impl == "foreach", setup.optimizer_impl == "fused"
    if setup.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=foreach, fused=fused)
    if setup.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    if setup.optimizer == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-3, foreach=foreach)
    raise ValueError(setup.optimizer)


def prepare_training(model, setup):
    """(model, optimizer) ready to train as a TrainingSetup says: LoRA adapters through peft,
    activation checkpointing as the Trainer enables it (non-reentrant), training mode."""
    if setup.method == "lora":
        import peft

        targets = "all-linear" if setup.lora_targets == "all-linear" else setup.lora_targets.split(",")
        lora = peft.LoraConfig(r=setup.lora_rank, lora_alpha=2 * setup.lora_rank, lora_dropout=0.0,
                               target_modules=targets)
        model = peft.get_peft_model(model, lora, autocast_adapter_dtype=False)
    elif setup.method != "full":
        raise ValueError(setup.method)
    if setup.checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if setup.method == "lora":
            model.enable_input_require_grads()
    model.train()
    return model, make_optimizer([p for p in model.parameters() if p.requires_grad], setup)


def training_step(model, optimizer, ids: torch.Tensor, setup) -> None:
    """Forward with the tokens as labels, backward, optimizer step, zero_grad: one full step;
    under amp the forward runs in torch.autocast with bfloat16."""
    autocast = torch.autocast(ids.device.type, dtype=torch.bfloat16) if setup.precision == "amp" \
        else contextlib.nullcontext()
    with autocast:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def training_tokens(model, setup, generator: torch.Generator) -> torch.Tensor:
    ids = torch.randint(0, model.config.vocab_size, (setup.micro_batch, setup.sequence), generator=generator)
    return ids.to(model.device)


# -- meters: the same questions on the CPU and on a CUDA GPU ---------------------------------

class CpuMeter:
    """Bytes of the live tensors created since the meter started (LiveBytes): what a model
    built inside holds, and the peak since reset_peak()."""

    device = "cpu"

    def __init__(self) -> None:
        self._live = LiveBytes()

    def __enter__(self) -> CpuMeter:
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.__exit__(*exc)

    def held(self) -> int:
        gc.collect()
        return self._live.current

    def reset_peak(self) -> None:
        gc.collect()
        self._live.reset_peak()

    def peak(self) -> int:
        return self._live.peak

    def reserved_peak(self) -> int | None:
        return None  # no caching allocator on the CPU


class CudaMeter:
    """torch.cuda.memory_allocated() and max_memory_allocated(), less what was allocated
    when the meter started; the peak statistics are reset by reset_peak()."""

    device = "cuda"

    def __enter__(self) -> CudaMeter:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self._base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc) -> None:
        pass

    def held(self) -> int:
        gc.collect()
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated() - self._base

    def reset_peak(self) -> None:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def peak(self) -> int:
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - self._base

    def reserved_peak(self) -> int:
        """The caching allocator's reserve at its largest: what nvidia-smi sees, less the context."""
        return torch.cuda.max_memory_reserved()


def cuda_outside_allocator_bytes() -> int:
    """GPU memory in use that PyTorch's caching allocator does not hold: the CUDA context and
    the libraries' own allocations (plus other processes on the same GPU, if any). Creating the
    context is part of the first call."""
    torch.cuda.init()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()
