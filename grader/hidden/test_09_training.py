"""Hidden graders of lesson 09_training (torch).

Never trains for real: ``noam_lr`` against the formula and its shape, ``label_smoothed_nll``
against ``F.cross_entropy`` (which it may not call), ``train_step`` on a tiny trusted model
(the ``tiny_seq2seq`` fixture, rebuilt here as the oracle) with a trusted SGD optimizer: the
returned loss, the parameters after one and after two steps, the scheduler's order, the
training mode, the device. Inputs are drawn afresh for every grading run. A wrong answer is
compared with the results of the common mistakes (``suspect``): the one it matches is the
hint.
"""

import math

import torch

from grader.runtime.errors import SubmissionError
from grader.runtime.fixtures import tiny_seq2seq
from grader.testkit.framework import (
    ON_DEVICE_MODEL,
    Failed,
    check,
    close,
    diagnose,
    exercise,
    gen,
    msg,
    suspect,
)

MISTAKES = {
    "noam_warmup_exponent": "the warm-up term uses warmup^-0.5 instead of warmup^-1.5",
    "noam_no_d_model": "the d_model^-0.5 factor is missing",
    "noam_d_model_sign": "the factor is d_model^0.5 instead of d_model^-0.5",
    "noam_max": "max instead of min",
    "noam_steps_from_0": "steps counted from 0 (step + 1 inside)",
    "noam_no_step_factor": "the warm-up term lacks its factor step",
    "noam_not_float": "noam_lr returns a tensor or an array instead of a Python float",
    "nll_pads_counted": "padding positions are counted in the mean",
    "nll_smoothing_v_minus_1": "ε spread over the V - 1 wrong classes instead of all V",
    "nll_smoothing_ignored": "the smoothing term is missing",
    "nll_sum": "the loss is summed instead of averaged",
    "nll_softmax_axis": "the log-softmax runs over the tokens instead of the classes",
    "nll_pad_id_hardcoded": "padding taken as id 0 instead of pad_id",
    "nll_log_of_softmax": "log(softmax(x)) underflows to -inf on large logits",
    "nll_fixed_rank": "the loss works on logits [B, L, V] only, not on any leading shape [..., V]",
    "nll_not_scalar": "the loss returns one value per token instead of their mean, a scalar",
    "no_zero_grad": "optimizer.zero_grad() is never called",
    "no_optimizer_step": "optimizer.step() is never called",
    "two_optimizer_steps": "optimizer.step() is called twice",
    "grad_clipped": "the gradients are clipped or scaled before the step",
    "returns_tensor": "train_step returns a tensor instead of a float",
    "returns_loss_after_update": "train_step returns the loss after the update",
    "target_not_shifted": "the loss is scored on the decoder's input instead of tgt[:, 1:]",
    "smoothing_not_passed": "train_step does not pass smoothing to the loss",
    "step_pad_id_hardcoded": "train_step scores with pad id 0 instead of model.pad_id",
    "scheduler_before_optimizer": "scheduler.step() before optimizer.step()",
    "scheduler_ignored": "the scheduler is never stepped",
    "train_step_eval_mode": "train_step trains the model in evaluation mode",
    "batch_not_moved": "the batch is not moved to the model's device",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "noam_lr": {
        "d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)":
            ("noam_warmup_exponent", "noam_no_d_model", "noam_d_model_sign", "noam_max", "noam_no_step_factor"),
        "step counts from 1": ("noam_steps_from_0",),
        "returned as a Python float": ("noam_not_float",),
    },
    "label_smoothed_nll": {
        "logits [..., V] and target [...], any leading shape": ("nll_fixed_rank",),
        "a scalar: the mean over the positions where target != pad_id (pad_id, the argument)":
            ("nll_not_scalar", "nll_sum", "nll_pads_counted", "nll_pad_id_hardcoded"),
        "equal to F.cross_entropy(..., label_smoothing=smoothing): ε spread over all V classes":
            ("nll_smoothing_v_minus_1", "nll_smoothing_ignored"),
        "built from torch.log_softmax over the classes": ("nll_log_of_softmax", "nll_softmax_axis"),
        "F.cross_entropy is refused (the lesson's first rule)": ("library_call",),
        "logits and target are left as they were (the lesson's second rule)": ("changes_its_input",),
    },
    "train_step": {
        "puts the model in training mode": ("train_step_eval_mode",),
        "clears the old gradients (optimizer.zero_grad())": ("no_zero_grad",),
        "the model reads tgt[:, :-1] and is scored on tgt[:, 1:]": ("target_not_shifted",),
        "scored with label_smoothed_nll(..., smoothing, model.pad_id)": ("smoothing_not_passed", "step_pad_id_hardcoded"),
        # the recipe the text lists: loss.backward(); optimizer.step() (nothing in between)
        "one optimisation step: loss.backward(), then optimizer.step() once, on the gradient backward left":
            ("no_optimizer_step", "two_optimizer_steps", "grad_clipped"),
        "then scheduler.step(), if there is one, after the optimizer": ("scheduler_before_optimizer", "scheduler_ignored"),
        "returns the loss before the update, as a Python float (loss.item())":
            ("returns_tensor", "returns_loss_after_update"),
        "moves the batch to the model's device": ("batch_not_moved",),
    },
}

# train_step is graded with the course's loss, so a loss mistake is charged once (grader.testkit.parts).
BUILDS_ON = {"train_step": ("label_smoothed_nll",)}

NO_CE = ("torch.nn.functional.cross_entropy",)


# --- noam_lr ---------------------------------------------------------------------------

NOAM = {
    None: lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -1.5),
    "noam_warmup_exponent": lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -0.5),
    "noam_no_d_model": lambda s, d, w: min(s ** -0.5, s * w ** -1.5),
    "noam_d_model_sign": lambda s, d, w: d ** 0.5 * min(s ** -0.5, s * w ** -1.5),
    "noam_max": lambda s, d, w: d ** -0.5 * max(s ** -0.5, s * w ** -1.5),
    "noam_steps_from_0": lambda s, d, w: d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * w ** -1.5),
    "noam_no_step_factor": lambda s, d, w: d ** -0.5 * min(s ** -0.5, w ** -1.5),
}
NOAM_HINTS = {
    "noam_warmup_exponent": msg("during warm-up the rate is step · warmup^-1.5 (times d_model^-0.5): the exponent of warmup is -1.5, so that both terms meet at step = warmup"),
    "noam_no_d_model": msg("the factor d_model^-0.5 is missing: a wider model takes smaller steps"),
    "noam_d_model_sign": msg("the factor is d_model^-0.5, not d_model^0.5: a wider model takes smaller steps"),
    "noam_max": msg("the rate is the min of the two terms: with max it starts at its largest and never warms up"),
    "noam_steps_from_0": msg("steps count from 1 (noam_lr(1, ...) is the first rate): use step as given, not step + 1"),
    "noam_no_step_factor": msg("the warm-up term is step · warmup^-1.5: it grows with the step"),
}


def _as_rate(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Failed(msg("noam_lr should return a number (a Python float)")) from None


def _rates(sub, cases):
    """noam_lr at every case, the calls sent together (one round trip), read in order."""
    with sub.batch() as b:
        rates = [b.call("noam_lr", *c) for c in cases]
    return torch.tensor([_as_rate(r.value) for r in rates], dtype=torch.float64)


def _noam_suspects(cases):
    return [suspect(m, torch.tensor([NOAM[m](*c) for c in cases], dtype=torch.float64), NOAM_HINTS[m])
            for m in NOAM_HINTS]


def noam_cases(n):
    g = gen(n)
    cases = []
    for _ in range(2):
        d_model = 2 ** int(torch.randint(5, 10, (1,), generator=g))
        warmup = int(torch.randint(100, 5000, (1,), generator=g))
        cases += [(s, d_model, warmup) for s in (1, int(torch.randint(2, warmup, (1,), generator=g)),
                                                warmup, int(torch.randint(warmup + 1, 40 * warmup, (1,), generator=g)))]
    return cases


@exercise("noam_lr", points=1)
def test_noam_values(sub):
    cases = noam_cases(1)
    close(_rates(sub, cases), torch.tensor([NOAM[None](*c) for c in cases], dtype=torch.float64),
          msg("noam_lr(step, d_model, warmup) should be d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) at (step, d_model, warmup) = {cases} (steps count from 1)", cases=cases),
          rtol=1e-6, atol=0, suspects=_noam_suspects(cases))


@exercise("noam_lr", points=0.5)
def test_noam_peak_at_warmup(sub):
    warmup = int(torch.randint(20, 80, (1,), generator=gen(2)))
    cases = [(s, 64, warmup) for s in range(1, 4 * warmup)]
    values = _rates(sub, cases)
    peak = 1 + int(values.argmax())
    if peak != warmup or not math.isclose(float(values[warmup - 1]), (64 * warmup) ** -0.5, rel_tol=1e-6):
        close(values, torch.tensor([NOAM[None](*c) for c in cases], dtype=torch.float64),
              msg("the rate should rise linearly up to step = warmup ({warmup}), where it is (d_model · warmup)^-0.5, and decay after it, but it peaks at step {peak}", warmup=warmup, peak=peak),
              rtol=1e-6, atol=0, suspects=_noam_suspects(cases))


@exercise("noam_lr", points=0.5)
def test_noam_d_model_factor(sub):
    rate = sub.call("noam_lr", 10, 64, 100)
    check(isinstance(rate, float), msg("noam_lr should return the rate as a Python float, got a {rate}: compute it with Python numbers (** and min), or return .item()", rate=type(rate).__name__),
          mistake="noam_not_float")
    for step in (10, 1000):
        wide, narrow = _rates(sub, [(step, 256, 100), (step, 64, 100)]).tolist()
        ratio = wide / narrow
        if not math.isclose(ratio, 0.5, rel_tol=1e-6):
            check(not math.isclose(ratio, 1.0, rel_tol=1e-6), NOAM_HINTS["noam_no_d_model"],
                  mistake="noam_no_d_model")
            check(not math.isclose(ratio, 2.0, rel_tol=1e-6), NOAM_HINTS["noam_d_model_sign"],
                  mistake="noam_d_model_sign")
            check(False, msg("a 4× wider model should get half the learning rate: multiply by d_model^-0.5"))


# --- label_smoothed_nll ----------------------------------------------------------------

def logits_and_target(n, V=11, pad_id=0, pads=True):
    """Logits [3, 6, V] and a target [3, 6] (padding at the end of two rows)."""
    g = gen(n)
    logits = 2.0 * torch.randn(3, 6, V, generator=g)
    target = torch.randint(1, V, (3, 6), generator=g)
    target[target == pad_id] = (pad_id + 1) % V
    if pads:
        target[1, 3:] = pad_id
        target[2, 5:] = pad_id
    return logits, target


def ref_nll(logits, target, smoothing, pad_id, mistake=None):
    V = logits.shape[-1]
    x, t = logits.reshape(-1, V).double(), target.reshape(-1)
    keep = t != (0 if mistake == "nll_pad_id_hardcoded" else pad_id)
    logp = torch.log_softmax(x, dim=0 if mistake == "nll_softmax_axis" else -1)
    nll = -logp.gather(1, t[:, None].clamp(0, V - 1)).squeeze(1)
    if mistake == "nll_smoothing_v_minus_1":
        uniform = (-logp.sum(-1) - nll) / (V - 1)
    else:
        uniform = -logp.mean(-1)
    eps = 0.0 if mistake == "nll_smoothing_ignored" else smoothing
    per_token = (1.0 - eps) * nll + eps * uniform
    if mistake == "nll_pads_counted":
        return ((1.0 - eps) * nll * keep + eps * uniform).mean()
    if mistake == "nll_pads_zeroed":
        return (per_token * keep).mean()
    if mistake == "nll_sum":
        return per_token[keep].sum()
    return per_token[keep].mean()


NLL_HINTS = {
    "nll_pads_counted": msg("the padding positions count in the mean: average over the tokens that are not pad_id only (select them, or divide by their number)"),
    "nll_pads_zeroed": msg("the padding positions are zeroed but still counted in the mean: divide by the number of real tokens, not of all positions"),
    "nll_smoothing_v_minus_1": msg("ε is spread over the V - 1 wrong classes: the course (like F.cross_entropy) spreads it over all V classes, ε·mean_k(-log p_k)"),
    "nll_smoothing_ignored": msg("the smoothing term is missing: loss = (1 - ε)·(-log p_y) + ε·mean_k(-log p_k)"),
    "nll_sum": msg("the loss is summed over the tokens: it should be their mean"),
    "nll_softmax_axis": msg("the log-softmax runs over the tokens: it runs over the V classes (the last axis)"),
    "nll_pad_id_hardcoded": msg("padding is taken as id 0: compare the target with the pad_id argument"),
}
NLL_IDS = {"nll_pads_zeroed": "nll_pads_counted"}


def nll_suspects(logits, target, smoothing, pad_id):
    return [suspect(NLL_IDS.get(m, m), (lambda m=m: ref_nll(logits, target, smoothing, pad_id, m)), NLL_HINTS[m])
            for m in NLL_HINTS]


def _nll(sub, *args):
    return sub.call("label_smoothed_nll", *args, forbid=NO_CE)


def check_nll(sub, logits, target, smoothing, pad_id, message):
    got = _nll(sub, logits, target, smoothing, pad_id)
    close(got, ref_nll(logits, target, smoothing, pad_id), message, atol=1e-5,
          suspects=nll_suspects(logits, target, smoothing, pad_id))
    return got


@exercise("label_smoothed_nll", points=1)
def test_nll_without_smoothing(sub):
    logits, target = logits_and_target(10, pads=False)
    check_nll(sub, logits, target, 0.0, 0, msg("with smoothing=0 and no padding the loss is the mean of -log softmax(logits)[target] over all tokens"))


@exercise("label_smoothed_nll", points=1)
def test_nll_with_smoothing(sub):
    logits, target = logits_and_target(11, pads=False)
    for eps in (0.1, 0.3):
        check_nll(sub, logits, target, eps, 0, msg("with smoothing={eps} the target keeps 1 - ε on the right class and spreads ε uniformly over all V classes (the right one included, like F.cross_entropy)", eps=eps))
    big = logits * 100.0  # a confident model's logits: some probabilities are below 1e-300
    got = _nll(sub, big, target, 0.1, 0)
    check(bool(torch.isfinite(torch.as_tensor(got)).all()),
          msg("with large logits (the ones above times 100) the loss is not finite: log(softmax(x)) rounds tiny probabilities to 0 and log(0) = -inf; torch.log_softmax subtracts the maximum first and stays finite"), mistake="nll_log_of_softmax")
    close(got, ref_nll(big, target, 0.1, 0), msg("with large logits (the ones above times 100) the loss should still be the label-smoothed cross-entropy"), atol=1e-3)


@exercise("label_smoothed_nll", points=0.5)
def test_nll_ignores_padding(sub):
    for pad_id in (0, 5):
        logits, target = logits_and_target(12 + pad_id, pad_id=pad_id)
        want = check_nll(sub, logits, target, 0.1, pad_id, msg("the loss should be the mean over the tokens that are not pad_id ({pad_id})", pad_id=pad_id))
        other = logits.clone()
        other[target == pad_id] = 50.0
        close(_nll(sub, other, target, 0.1, pad_id), want,
              msg("the logits at padding positions must not change the loss"), atol=1e-5)


@exercise("label_smoothed_nll", points=0.5)
def test_nll_shapes(sub):
    logits, target = logits_and_target(20, pads=False)
    flat_logits, flat_target = logits.reshape(-1, 11), target.reshape(-1)
    try:
        got = _nll(sub, flat_logits, flat_target, 0.2, 0)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise
        _nll(sub, logits, target, 0.2, 0)  # [B, L, V] works (else that failure is what it says)
        diagnose("nll_fixed_rank", msg("label_smoothed_nll works on logits [B, L, V] but fails on [N, V] ({error_type}): logits may have any leading shape [..., V]; flatten them with logits.reshape(-1, V) and target.reshape(-1)", error_type=exc.exc_type))
    check(hasattr(got, "shape"), msg("the loss should be a tensor (train_step calls its backward()), got a {got}", got=type(got).__name__))
    check(tuple(got.shape) == (), msg("the loss should be a scalar tensor (shape []), the mean over the tokens, got shape {got_shape}", got_shape=list(got.shape)), mistake="nll_not_scalar")
    close(got, ref_nll(logits, target, 0.2, 0), msg("logits [N, V] with target [N] should work too"),
          atol=1e-5, suspects=nll_suspects(flat_logits, flat_target, 0.2, 0))


# --- train_step ------------------------------------------------------------------------

SV, TV = 9, 10


def step_batch(n, pad_id=0):
    """A batch (src [3, 4], tgt [3, 5]) starting with bos (1), ending with eos (2), padded."""
    g = gen(n)
    src = torch.randint(3, SV, (3, 4), generator=g)
    tgt = torch.randint(3, TV, (3, 5), generator=g)
    src[:, -1], tgt[:, 0], tgt[:, -1] = 2, 1, 2
    src[1, 2:], tgt[1, 3:] = pad_id, pad_id
    src[1, 1], tgt[1, 2] = 2, 2
    return src, tgt


def _oracle(pad_id=0, seed=3, out_scale=1.0):
    """The trusted stand-in; ``out_scale`` multiplies its output weights (steeper gradients)."""
    model = tiny_seq2seq(SV, TV, 8, pad_id, seed)
    if out_scale != 1.0:
        with torch.no_grad():
            model.out.weight.mul_(out_scale)
    return model


def _oracle_loss(model, src, tgt, smoothing, target_slice=slice(1, None), pad_id=None):
    logits = model(src, tgt[:, :-1])
    return ref_nll(logits, tgt[:, target_slice], smoothing, model.pad_id if pad_id is None else pad_id).float(), logits


def _sgd_steps(model, batches, lrs, smoothing=0.0, mistake=None, clip=None):
    """What train_step does to ``model`` (SGD) over ``batches``, with one of the mistakes
    (or its gradients clipped to the norm ``clip``)."""
    grads = None
    for (src, tgt), lr in zip(batches, lrs, strict=True):
        if mistake != "no_zero_grad" or grads is None:
            model.zero_grad()
        target = slice(None, -1) if mistake == "target_not_shifted" else slice(1, None)
        eps = 0.0 if mistake == "smoothing_not_passed" else smoothing
        pad = 0 if mistake == "step_pad_id_hardcoded" else None
        loss, _ = _oracle_loss(model, src, tgt, eps, target, pad)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        grads = True
        if mistake == "no_optimizer_step":
            continue
        with torch.no_grad():
            for _ in range(2 if mistake == "two_optimizer_steps" else 1):
                for p in model.parameters():
                    p -= lr * p.grad
    return model


STEP_HINTS = {
    "no_zero_grad": msg("the second train_step moved the parameters along the sum of both steps' gradients: call optimizer.zero_grad() before backward (PyTorch adds new gradients to the old ones)"),
    "no_optimizer_step": msg("the parameters did not change: train_step must call loss.backward() and optimizer.step()"),
    "two_optimizer_steps": msg("the parameters moved two steps: call optimizer.step() once per train_step"),
    "target_not_shifted": msg("the loss is scored on the decoder's input tgt[:, :-1]: the model reads tgt[:, :-1] and must predict tgt[:, 1:]"),
    "smoothing_not_passed": msg("the loss ignores train_step's smoothing: pass it on, label_smoothed_nll(logits, tgt[:, 1:], smoothing, model.pad_id)"),
    "step_pad_id_hardcoded": msg("the loss takes pad id 0: score with the model's own pad id, label_smoothed_nll(..., model.pad_id)"),
    "scheduler_before_optimizer": msg("the scheduler is stepped before the optimizer, so the first step already uses the second learning rate: call scheduler.step() after optimizer.step()"),
    "scheduler_ignored": msg("the scheduler is never stepped: call scheduler.step() after optimizer.step() when one is given"),
}


def _student_setup(sub, lr, pad_id=0, seed=3, scheduler=False, train=True, out_scale=1.0):
    model = sub.fixture("tiny_seq2seq", SV, TV, 8, pad_id, seed)
    if out_scale != 1.0:
        model.load_state_dict(_oracle(pad_id, seed, out_scale).state_dict())
    if not train:
        model.eval()
    optimizer = sub.fixture("sgd", model, lr=lr)
    sched = sub.fixture("step_lr", optimizer, step_size=1, gamma=0.5) if scheduler else None
    return model, optimizer, sched


def _params(model_handle):
    return {k: v for k, v in model_handle.inspect()["parameters"].items()}


def _flat(params):
    return torch.cat([p.detach().reshape(-1).float() for _, p in sorted(params.items())])


def _compare_params(model_handle, batches, lrs, message, mistakes, smoothing=0.0, lr_variants=None,
                    out_scale=1.0):
    def oracle():
        return _oracle(out_scale=out_scale)

    got = _flat(_params(model_handle))
    want = _flat(dict(_sgd_steps(oracle(), batches, lrs, smoothing).named_parameters()))
    suspects = [suspect(m, (lambda m=m: _flat(dict(_sgd_steps(oracle(), batches, lrs, smoothing, m).named_parameters()))),
                        STEP_HINTS[m]) for m in mistakes if m in STEP_HINTS]
    for m, other_lrs in (lr_variants or {}).items():
        suspects.append(suspect(m, (lambda o=other_lrs: _flat(dict(_sgd_steps(oracle(), batches, o, smoothing).named_parameters()))),
                                STEP_HINTS[m]))
    suspects += [suspect("grad_clipped", (lambda c=c: _flat(dict(_sgd_steps(oracle(), batches, lrs, smoothing, clip=c).named_parameters()))),
                         msg("the parameters moved as if the gradients had been clipped to norm {c} (clip_grad_norm_): train_step steps on the gradient as backward left it", c=format(c, 'g')))
                 for c in CLIP_NORMS]
    close(got, want, message, atol=1e-5, suspects=suspects)


#: the max_norm values a clip_grad_norm_ call is usually given
CLIP_NORMS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
#: the stand-in's output weights times this give gradients of norm 10 to 27 on step_batch
#: (60 draws measured; 0.5 to 1.2 without): clipping to any of CLIP_NORMS changes that step
STEEP = 20.0


#: what train_step is meant to change (its model, optimizer and scheduler), by position
TRAINED = (0, 2, 3, "model", "optimizer", "scheduler")

STEP_MISTAKES = ("no_zero_grad", "no_optimizer_step", "two_optimizer_steps", "target_not_shifted",
                 "smoothing_not_passed", "step_pad_id_hardcoded")


@exercise("train_step", points=1.25)
def test_train_step_returns_loss_before_update(sub):
    pad_id = 3
    src, tgt = step_batch(30, pad_id)
    model, optimizer, _ = _student_setup(sub, lr=0.5, pad_id=pad_id)
    loss = sub.call("train_step", model, (src, tgt), optimizer, None, 0.1, changes=TRAINED)
    check(not hasattr(loss, "shape"), msg("train_step should return the loss as a Python float (loss.item()), not a {loss}: a tensor would keep its graph alive", loss=type(loss).__name__),
          mistake="returns_tensor")
    check(isinstance(loss, float), msg("train_step should return the loss as a Python float (loss.item()), got a {loss}", loss=type(loss).__name__))
    oracle = _oracle(pad_id)
    with torch.no_grad():
        want, logits = _oracle_loss(oracle, src, tgt, 0.1)
    # the student's train_step scores with the student's own label_smoothed_nll: compare
    # with that function on the right logits, so that a loss bug costs points only there
    try:
        own = float(sub.call("label_smoothed_nll", logits, tgt[:, 1:], 0.1, pad_id))
    except Exception:  # noqa: BLE001 - their loss is broken: judge against the true one
        own = float(want)
    if math.isclose(loss, own, rel_tol=1e-4, abs_tol=1e-6) or math.isclose(loss, float(want), rel_tol=1e-4):
        return
    stepped = _sgd_steps(_oracle(pad_id), [(src, tgt)], [0.5], 0.1)
    with torch.no_grad():
        after, _ = _oracle_loss(stepped, src, tgt, 0.1)
        candidates = {m: float(_oracle_loss(_oracle(pad_id), src, tgt, *args)[0]) for m, args in (
            ("target_not_shifted", (0.1, slice(None, -1))), ("smoothing_not_passed", (0.0,)),
            ("step_pad_id_hardcoded", (0.1, slice(1, None), 0)))}
    candidates["returns_loss_after_update"] = float(after)
    hints = dict(STEP_HINTS, returns_loss_after_update=msg("train_step returned the loss after the update: compute the loss, keep loss.item(), then step; return the value from before optimizer.step()"))
    for mistake, value in candidates.items():
        if math.isclose(loss, value, rel_tol=1e-4) and not math.isclose(value, float(want), rel_tol=1e-4):
            diagnose(mistake, msg("{hint} (yours {loss}, right {want})", hint=hints[mistake], loss=format(loss, '.5f'), want=format(float(want), '.5f')))
    check(False, msg("train_step returned {loss}, but the loss before the update is {want}: feed the model tgt[:, :-1], score it on tgt[:, 1:] with label_smoothed_nll(..., smoothing, model.pad_id), and return the loss computed before optimizer.step()", loss=format(loss, '.5f'), want=format(float(want), '.5f')))


@exercise("train_step", points=1)
def test_train_step_updates_parameters(sub):
    batch = step_batch(31)
    model, optimizer, _ = _student_setup(sub, lr=0.5, out_scale=STEEP)
    before = _params(model)
    sub.call("train_step", model, batch, optimizer, changes=TRAINED)
    after = _params(model)
    check(any(not torch.equal(before[k], after[k]) for k in before), STEP_HINTS["no_optimizer_step"],
          mistake="no_optimizer_step")
    _compare_params(model, [batch], [0.5], msg("after one train_step the parameters should be exactly one optimizer step along the gradient of the loss (backward once, step once)"),
                    STEP_MISTAKES, out_scale=STEEP)


@exercise("train_step", points=0.75)
def test_train_step_zero_grad(sub):
    first, second = step_batch(32), step_batch(33)
    model, optimizer, _ = _student_setup(sub, lr=0.5)
    sub.call("train_step", model, first, optimizer, changes=TRAINED)
    sub.call("train_step", model, second, optimizer, changes=TRAINED)
    _compare_params(model, [first, second], [0.5, 0.5], msg("after two train_steps the parameters should be two optimizer steps, each along its own batch's gradient"), STEP_MISTAKES)


@exercise("train_step", points=0.5)
def test_train_step_scheduler(sub):
    first, second = step_batch(34), step_batch(35)
    model, optimizer, sched = _student_setup(sub, lr=0.4, scheduler=True)
    sub.call("train_step", model, first, optimizer, sched, changes=TRAINED)
    sub.call("train_step", model, second, optimizer, scheduler=sched, changes=TRAINED)
    _compare_params(model, [first, second], [0.4, 0.2], msg("with a scheduler (the rate halves after each step), train_step should call scheduler.step() once, after optimizer.step(): the first step uses the initial learning rate"), STEP_MISTAKES,
                    lr_variants={"scheduler_before_optimizer": [0.2, 0.1], "scheduler_ignored": [0.4, 0.4]})


@exercise("train_step", points=0.25)
def test_train_step_training_mode(sub):
    model, optimizer, _ = _student_setup(sub, lr=0.1, train=False)  # left in eval mode by an evaluation
    sub.call("train_step", model, step_batch(36), optimizer, changes=TRAINED)
    check(model.get("calls_in_eval") == 0, msg("train_step ran the model in evaluation mode (an evaluation before it left it there): call model.train() at the start, so that dropout is on while training"), mistake="train_step_eval_mode")


@exercise("train_step", points=0.25)
def test_train_step_on_the_model_device(sub):
    model, optimizer, _ = _student_setup(sub, lr=0.1)
    try:
        sub.call("train_step", model, step_batch(37), optimizer, forbid=(ON_DEVICE_MODEL,), changes=TRAINED)
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("batch_not_moved", msg("with the model on a GPU and the batch on the CPU (a DataLoader's), this step fails: {error}; move src and tgt to the model's device first (device = next(model.parameters()).device)", error=exc.message))
        raise
