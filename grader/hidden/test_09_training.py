"""Hidden graders of lesson 09_training (torch).

Never trains for real: ``noam_lr`` against the formula and its shape, ``label_smoothed_nll``
against ``F.cross_entropy`` (which it may not call), ``train_step`` on a tiny trusted model
(the ``tiny_seq2seq`` fixture, rebuilt here as the oracle) with a trusted SGD optimizer: the
returned loss, the parameters after one and after two steps, the scheduler's order.
"""

import math

import torch
import torch.nn.functional as F

from grader.framework import Failed, check, close, exercise
from grader.runtime.errors import SubmissionError
from grader.runtime.fixtures import tiny_seq2seq

NO_CE = ("torch.nn.functional.cross_entropy",)


# --- noam_lr ---------------------------------------------------------------------------

def ref_noam(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def _lr(sub, step, d_model, warmup):
    value = sub.call("noam_lr", step, d_model, warmup)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Failed("noam_lr should return a number (a Python float)") from None


@exercise("noam_lr", points=1)
def test_noam_values(sub):
    for d_model, warmup in ((512, 4000), (64, 400)):
        for step in (1, 7, warmup // 2, warmup, 2 * warmup, 25_000):
            got, want = _lr(sub, step, d_model, warmup), ref_noam(step, d_model, warmup)
            check(math.isclose(got, want, rel_tol=1e-6),
                  f"noam_lr({step}, {d_model}, {warmup}) should be d_model^-0.5 · min(step^-0.5, "
                  f"step · warmup^-1.5) = {want:.6g}, got {got:.6g} (steps count from 1)")


@exercise("noam_lr", points=0.5)
def test_noam_peak_at_warmup(sub):
    warmup = 50
    values = [_lr(sub, s, 64, warmup) for s in range(1, 4 * warmup)]
    peak = 1 + max(range(len(values)), key=values.__getitem__)
    check(peak == warmup, f"the rate should rise linearly up to step = warmup ({warmup}) and decay "
          f"after it, but it peaks at step {peak}: the warm-up term is step · warmup^-1.5")
    check(math.isclose(values[warmup - 1], (64 * warmup) ** -0.5, rel_tol=1e-6),
          "at step = warmup the rate should be (d_model · warmup)^-0.5")


@exercise("noam_lr", points=0.5)
def test_noam_d_model_factor(sub):
    for step in (10, 1000):
        ratio = _lr(sub, step, 256, 100) / _lr(sub, step, 64, 100)
        check(math.isclose(ratio, 0.5, rel_tol=1e-6),
              "a 4× wider model should get half the learning rate: multiply by d_model^-0.5")


# --- label_smoothed_nll ----------------------------------------------------------------

G = torch.Generator().manual_seed(9)
LOGITS = 2.0 * torch.randn(3, 6, 11, generator=G)
TARGET = torch.tensor([[4, 5, 6, 7, 2, 0], [4, 9, 2, 0, 0, 0], [10, 3, 8, 5, 6, 2]])


def ref_nll(logits, target, smoothing, pad_id):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad_id,
                           label_smoothing=smoothing)


def _nll(sub, *args):
    try:
        return sub.call("label_smoothed_nll", *args, forbid=NO_CE)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise Failed("label_smoothed_nll calls F.cross_entropy; build the loss yourself from "
                         "torch.log_softmax") from None
        raise


@exercise("label_smoothed_nll", points=1)
def test_nll_without_smoothing(sub):
    target = TARGET.clone()
    target[target == 0] = 1  # no padding here
    close(_nll(sub, LOGITS, target, 0.0, 0), ref_nll(LOGITS, target, 0.0, 0),
          "with smoothing=0 the loss is the mean of -log softmax(logits)[target] over all tokens",
          atol=1e-5)


@exercise("label_smoothed_nll", points=1)
def test_nll_with_smoothing(sub):
    target = TARGET.clone()
    target[target == 0] = 1
    for eps in (0.1, 0.3):
        close(_nll(sub, LOGITS, target, eps, 0), ref_nll(LOGITS, target, eps, 0),
              f"with smoothing={eps} the target keeps 1 - ε on the right class and spreads ε "
              f"uniformly over all V classes (the right one included, like F.cross_entropy): "
              f"loss = (1 - ε)·(-log p_y) + ε·mean_k(-log p_k)", atol=1e-5)


@exercise("label_smoothed_nll", points=0.5)
def test_nll_ignores_padding(sub):
    for pad_id in (0, 5):
        target = TARGET.clone()
        if pad_id:
            target[target == 5] = 1
            target[TARGET == 0] = pad_id
        want = ref_nll(LOGITS, target, 0.1, pad_id)
        close(_nll(sub, LOGITS, target, 0.1, pad_id), want,
              f"the loss should be the mean over the tokens that are not pad_id ({pad_id}): "
              f"padding must neither add to the sum nor to the count", atol=1e-5)
        other = LOGITS.clone()
        other[target == pad_id] = 50.0
        close(_nll(sub, other, target, 0.1, pad_id), want,
              "the logits at padding positions must not change the loss", atol=1e-5)


@exercise("label_smoothed_nll", points=0.5)
def test_nll_shapes(sub):
    target = TARGET.masked_fill(TARGET == 0, 1)  # no padding: this checks shapes only
    flat_logits, flat_target = LOGITS.reshape(-1, 11), target.reshape(-1)
    got = _nll(sub, flat_logits, flat_target, 0.2, 0)
    check(hasattr(got, "shape") and tuple(got.shape) == (),
          "the loss should be a scalar tensor (shape []), the mean over tokens")
    close(got, ref_nll(LOGITS, target, 0.2, 0), "logits [N, V] with target [N] should work too",
          atol=1e-5)


# --- train_step ------------------------------------------------------------------------

SV, TV = 9, 10
SRC = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [8, 8, 2, 0]])
TGT = torch.tensor([[1, 4, 5, 6, 2], [1, 7, 2, 0, 0], [1, 9, 9, 8, 2]])


def _swap_pad(t, pad_id):
    """The batch with its padding written as pad_id (no real token is pad_id here)."""
    return t.masked_fill(t == 0, pad_id)


def _oracle(pad_id=0, seed=3):
    return tiny_seq2seq(SV, TV, 8, pad_id, seed)


def _oracle_loss(model, src, tgt, smoothing):
    logits = model(src, tgt[:, :-1])
    return ref_nll(logits, tgt[:, 1:], smoothing, model.pad_id), logits


def _sgd_step(model, src, tgt, lr, smoothing=0.0):
    model.zero_grad()
    loss, _ = _oracle_loss(model, src, tgt, smoothing)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


def _student_setup(sub, lr, pad_id=0, seed=3, scheduler=False):
    model = sub.fixture("tiny_seq2seq", SV, TV, 8, pad_id, seed)
    optimizer = sub.fixture("sgd", model, lr=lr)
    sched = sub.fixture("step_lr", optimizer, step_size=1, gamma=0.5) if scheduler else None
    return model, optimizer, sched


def _params(model_handle):
    return {k: v for k, v in model_handle.inspect()["parameters"].items()}


def _compare_params(model_handle, oracle, message):
    got = _params(model_handle)
    for name, p in oracle.named_parameters():
        close(got[name], p.detach(), message, atol=1e-5)


@exercise("train_step", points=1.5)
def test_train_step_returns_loss_before_update(sub):
    pad_id = 3
    src, tgt = _swap_pad(SRC, pad_id), _swap_pad(TGT, pad_id)
    model, optimizer, _ = _student_setup(sub, lr=0.5, pad_id=pad_id)
    loss = sub.call("train_step", model, (src, tgt), optimizer, None, 0.1)
    check(isinstance(loss, float), f"train_step should return the loss as a Python float "
          f"(loss.item()), got a {type(loss).__name__}")
    oracle = _oracle(pad_id)
    with torch.no_grad():
        want, logits = _oracle_loss(oracle, src, tgt, 0.1)
    # the student's train_step scores with the student's own label_smoothed_nll: compare
    # with that function on the right logits, so that a loss bug costs points only there
    try:
        own = float(sub.call("label_smoothed_nll", logits, tgt[:, 1:], 0.1, pad_id))
    except Exception:  # noqa: BLE001 - their loss is broken: judge against the true one
        own = float(want)
    check(math.isclose(loss, own, rel_tol=1e-4, abs_tol=1e-6) or math.isclose(loss, float(want), rel_tol=1e-4),
          f"train_step returned {loss:.5f}, but the loss before the update is {float(want):.5f}: "
          f"feed the model tgt[:, :-1], score it on tgt[:, 1:] with label_smoothed_nll(..., "
          f"smoothing, model.pad_id), and return the loss computed before optimizer.step()")


@exercise("train_step", points=1)
def test_train_step_updates_parameters(sub):
    model, optimizer, _ = _student_setup(sub, lr=0.5)
    before = _params(model)
    sub.call("train_step", model, (SRC, TGT), optimizer)
    after = _params(model)
    check(any(not torch.equal(before[k], after[k]) for k in before),
          "the parameters did not change: train_step must call loss.backward() and optimizer.step()")
    oracle = _oracle()
    _sgd_step(oracle, SRC, TGT, lr=0.5)
    _compare_params(model, oracle, "after one train_step the parameters should be exactly one "
                    "optimizer step along the gradient of the loss (backward once, step once)")


@exercise("train_step", points=1)
def test_train_step_zero_grad(sub):
    model, optimizer, _ = _student_setup(sub, lr=0.5)
    sub.call("train_step", model, (SRC, TGT), optimizer)
    sub.call("train_step", model, (SRC[:2], TGT[:2]), optimizer)
    oracle = _oracle()
    _sgd_step(oracle, SRC, TGT, lr=0.5)
    _sgd_step(oracle, SRC[:2], TGT[:2], lr=0.5)
    _compare_params(model, oracle, "the second train_step moved the parameters along the sum of "
                    "both steps' gradients: call optimizer.zero_grad() before backward (PyTorch "
                    "adds new gradients to the old ones)")


@exercise("train_step", points=0.5)
def test_train_step_scheduler(sub):
    model, optimizer, sched = _student_setup(sub, lr=0.4, scheduler=True)
    sub.call("train_step", model, (SRC, TGT), optimizer, sched)
    sub.call("train_step", model, (SRC[1:], TGT[1:]), optimizer, scheduler=sched)
    oracle = _oracle()
    _sgd_step(oracle, SRC, TGT, lr=0.4)
    _sgd_step(oracle, SRC[1:], TGT[1:], lr=0.2)
    _compare_params(model, oracle, "with a scheduler, train_step should call scheduler.step() once, "
                    "after optimizer.step(): the first step uses the initial learning rate")
