"""Real training steps on the CPU, measured: the peak live bytes the engine's training answers
are pinned against (tests/test_peft_recipes.py, tests/test_loss_setups.py)."""

from __future__ import annotations

import contextlib


def two_steps(build, loss_of, vocab: int, batch: int, sequence: int, autocast: bool = True) -> tuple[int, int]:
    """Peak live bytes of the second of two full steps (forward, backward, AdamW, zero_grad),
    everything built inside the meter, and the peak of that step's forward alone. `loss_of(model,
    ids)` is the forward with its loss; whatever else it holds is released when it returns, before
    the backward (as a Trainer's compute_loss). autocast: the forward under bfloat16 autocast."""
    import torch

    from bench.measure import LiveBytes

    with LiveBytes() as meter:
        model = build()
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=False)
        generator = torch.Generator().manual_seed(1)
        for _ in range(2):
            ids = torch.randint(0, vocab, (batch, sequence), generator=generator)
            meter.peak = meter.current
            with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
                loss = loss_of(model, ids)
            forward = meter.peak
            loss.backward()
            del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return meter.peak, forward
