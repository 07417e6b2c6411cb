"""Lesson 09's mixed precision does what the lesson says: ``autocast_forward`` runs the
model's forward pass under autocast (matrix products in bf16) and returns float32 logits,
while backward, the optimizer step, the parameters and ``train_step`` stay float32 and
device-agnostic. Checked with CPU autocast, which takes the same code path as CUDA's."""

from __future__ import annotations

import torch

from coursekit.reference.lesson08 import Transformer, greedy_decode
from coursekit.reference.lesson09 import autocast_forward, train_step

SRC = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
TGT = torch.tensor([[1, 4, 5, 6, 2], [1, 7, 2, 0, 0]])


def _model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(9, 9, d_model=16, n_head=2, num_encoder_layers=1, num_decoder_layers=1,
                       d_ff=32, dropout=0.0)


def _generator_dtypes(model: Transformer, run) -> list[torch.dtype]:
    seen = []
    handle = model.generator.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    try:
        run()
    finally:
        handle.remove()
    return seen


def test_forward_runs_in_bf16_and_returns_float32_logits() -> None:
    model = autocast_forward(_model(), dtype=torch.bfloat16)
    inner = _generator_dtypes(model, lambda: model(SRC, TGT))
    assert inner == [torch.bfloat16], "the matrix products should run in bf16 under autocast"
    assert model(SRC, TGT).dtype == torch.float32, "the logits come back in float32"


def test_parameters_state_dict_and_gradients_stay_float32() -> None:
    plain, wrapped = _model(), autocast_forward(_model())
    assert list(wrapped.state_dict()) == list(plain.state_dict())
    wrapped(SRC, TGT[:, :-1]).sum().backward()
    assert all(p.dtype == torch.float32 and (p.grad is None or p.grad.dtype == torch.float32)
               for p in wrapped.parameters())


def test_train_step_is_unchanged_and_trains_the_wrapped_model() -> None:
    model = autocast_forward(_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = [train_step(model, (SRC, TGT), optimizer) for _ in range(30)]
    assert all(isinstance(loss, float) for loss in losses)
    assert losses[-1] < losses[0]
    assert not torch.is_autocast_enabled("cpu"), "autocast must not leak out of the forward pass"


def test_greedy_decoding_does_not_go_through_forward() -> None:
    model = autocast_forward(_model())
    dtypes = _generator_dtypes(model, lambda: greedy_decode(model, SRC, 6, 1, 2))
    assert dtypes and set(dtypes) == {torch.float32}, "evaluation (encode/decode) runs in float32"
