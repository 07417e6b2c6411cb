"""Planted mistakes in lesson 09 (training) and alternative correct solutions."""

from planted import Variant, bug

LESSON = "09_training"

NOAM = "return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)"
MEAN = "return ((1.0 - smoothing) * nll + smoothing * uniform).mean()"

BUGS = [
    # noam_lr
    bug("noam_lr", "noam_warmup_exponent", "warmup exponent -0.5", (NOAM, "return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)")),
    bug("noam_lr", "noam_no_d_model", "missing d_model factor", (NOAM, "return min(step ** -0.5, step * warmup ** -1.5)")),
    bug("noam_lr", "noam_d_model_sign", "d_model factor with the wrong sign (d_model ** 0.5)",
        (NOAM, "return d_model ** 0.5 * min(step ** -0.5, step * warmup ** -1.5)")),
    bug("noam_lr", "noam_max", "max instead of min", (NOAM, "return d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5)")),
    bug("noam_lr", "noam_steps_from_0", "steps counted from 0 (step + 1 inside)",
        (NOAM, "return d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)")),
    bug("noam_lr", "noam_no_step_factor", "warm-up without the step factor",
        (NOAM, "return d_model ** -0.5 * min(step ** -0.5, warmup ** -1.5)")),
    # label_smoothed_nll
    bug("label_smoothed_nll", "nll_pads_counted", "pads counted in the loss mean",
        ("logp, target = logp[keep], target[keep]\n    ", ""),
        ("nll = -logp.gather(1, target[:, None]).squeeze(1)",
         "nll = -logp.gather(1, target[:, None]).squeeze(1) * keep")),
    bug("label_smoothed_nll", "nll_pads_counted", "pads zeroed but still counted in the mean",
        ("logp, target = logp[keep], target[keep]\n    ", ""),
        (MEAN, "return (((1.0 - smoothing) * nll + smoothing * uniform) * keep).mean()")),
    bug("label_smoothed_nll", "nll_smoothing_v_minus_1", "smoothing spread over V-1 classes",
        ("uniform = -logp.mean(dim=-1)",
         "uniform = (-logp.sum(dim=-1) - nll) / (V - 1)")),
    bug("label_smoothed_nll", "nll_smoothing_ignored", "smoothing ignored",
        (MEAN, "return nll.mean()")),
    bug("label_smoothed_nll", "nll_sum", "sum instead of mean",
        (MEAN, "return ((1.0 - smoothing) * nll + smoothing * uniform).sum()")),
    bug("label_smoothed_nll", "nll_softmax_axis", "softmax over the wrong axis",
        ("torch.log_softmax(logits.reshape(-1, V).float(), dim=-1)",
         "torch.log_softmax(logits.reshape(-1, V).float(), dim=0)")),
    bug("label_smoothed_nll", "library_call", "calls F.cross_entropy",
        ("V = logits.size(-1)",
         "V = logits.size(-1)\n    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), "
         "ignore_index=pad_id, label_smoothing=smoothing)")),
    bug("label_smoothed_nll", "nll_pad_id_hardcoded", "pad id hard-coded to 0", ("keep = target != pad_id", "keep = target != 0")),
    bug("train_step", "grad_clipped", "gradients clipped before the step",
        ("loss.backward()\n", "loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")),
    bug("train_step", "grad_clipped", "gradients clipped to norm 5 before the step",
        ("loss.backward()\n", "loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)\n")),
    bug("label_smoothed_nll", "nll_log_of_softmax", "log of softmax instead of log_softmax",
        ("torch.log_softmax(logits.reshape(-1, V).float(), dim=-1)",
         "torch.log(torch.softmax(logits.reshape(-1, V).float(), dim=-1))")),
    # train_step
    bug("train_step", "no_zero_grad", "no zero_grad", ("optimizer.zero_grad(set_to_none=True)\n    ", "")),
    bug("train_step", "no_optimizer_step", "no optimiser step", ("optimizer.step()\n    ", "")),
    bug("train_step", "returns_tensor", "returns the loss tensor, not a float", ("return loss.item()", "return loss")),
    bug("train_step", "returns_loss_after_update", "returns the loss after the update",
        ("return loss.item()",
         "with torch.no_grad():\n        return label_smoothed_nll(model(src, tgt[:, :-1]), tgt[:, 1:], smoothing, model.pad_id).item()")),
    bug("train_step", "target_not_shifted", "target not shifted (scored on the decoder input)",
        ("logits.float(), tgt[:, 1:], smoothing", "logits.float(), tgt[:, :-1], smoothing")),
    bug("train_step", "smoothing_not_passed", "smoothing not passed to the loss",
        ("logits.float(), tgt[:, 1:], smoothing, model.pad_id", "logits.float(), tgt[:, 1:], 0.0, model.pad_id")),
    bug("train_step", "step_pad_id_hardcoded", "pad id hard-coded to 0",
        ("logits.float(), tgt[:, 1:], smoothing, model.pad_id", "logits.float(), tgt[:, 1:], smoothing, 0")),
    bug("train_step", "scheduler_before_optimizer", "scheduler stepped before the optimizer",
        ("optimizer.step()\n    if scheduler is not None:\n        scheduler.step()",
         "if scheduler is not None:\n        scheduler.step()\n    optimizer.step()")),
    bug("train_step", "scheduler_ignored", "scheduler ignored",
        ("if scheduler is not None:\n        scheduler.step()", "pass")),
    bug("train_step", "two_optimizer_steps", "two optimiser steps",
        ("optimizer.step()\n", "optimizer.step()\n    optimizer.step()\n")),
    bug("label_smoothed_nll", "changes_its_input", "subtracts the row max from the caller's logits in place",
        ("logp = torch.log_softmax(logits.reshape(-1, V).float(), dim=-1)",
         "flat = logits.reshape(-1, V)\n    flat -= flat.max(dim=-1, keepdim=True).values  # for stability\n"
         "    logp = torch.log_softmax(flat.float(), dim=-1)")),
]

BUGS += [
    bug("noam_lr", "noam_not_float", "returns a 0-d tensor", (NOAM, "return torch.tensor(d_model, dtype=torch.float64) ** -0.5 * "
                                                             "min(step ** -0.5, step * warmup ** -1.5)")),
    bug("label_smoothed_nll", "nll_fixed_rank", "unpacks logits as [B, L, V]",
        ("V = logits.size(-1)", "B, L, V = logits.shape")),
    bug("label_smoothed_nll", "nll_not_scalar", "returns the per-token losses, no mean",
        (MEAN, "return (1.0 - smoothing) * nll + smoothing * uniform")),
    bug("train_step", "train_step_eval_mode", "no model.train() (an evaluation left the model in eval mode)",
        ("    model.train()\n", "")),
    bug("train_step", "batch_not_moved", "the batch is not moved to the model's device",
        ("src, tgt = (t.to(device, non_blocking=True) for t in batch)", "src, tgt = batch")),
]

ALTERNATIVES = [
    Variant("noam_lr", "numpy scalars turned into a float", source='''
import numpy as np


def noam_lr(step, d_model, warmup):
    return float(np.float64(d_model) ** -0.5 * np.minimum(step ** -0.5, step * warmup ** -1.5))
'''),
    Variant("label_smoothed_nll", "flattened with view(-1, V), masked sums", source='''
def label_smoothed_nll(logits, target, smoothing, pad_id):
    V = logits.shape[-1]
    logp = torch.log_softmax(logits.contiguous().view(-1, V), dim=-1)
    t = target.contiguous().view(-1)
    keep = (t != pad_id).float()
    picked = -logp.gather(-1, t.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    spread = -logp.mean(-1)
    per_token = (1 - smoothing) * picked + smoothing * spread
    return (per_token * keep).sum() / keep.sum()
'''),
    Variant("train_step", "the value kept before backward, device from the first parameter", source='''
def train_step(model, batch, optimizer, scheduler=None, smoothing=0.0):
    model.train(True)
    device = next(iter(model.parameters())).device
    src, tgt = batch[0].to(device), batch[1].to(device)
    decoder_in, wanted = tgt[:, :-1], tgt[:, 1:]
    loss = label_smoothed_nll(model(src, decoder_in), wanted, smoothing, model.pad_id)
    value = loss.detach().item()
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return value
'''),
    Variant("noam_lr", "if/else on the warm-up and math.pow", source='''
def noam_lr(step, d_model, warmup):
    if step < warmup:
        return math.pow(d_model, -0.5) * step * math.pow(warmup, -1.5)
    return math.pow(d_model, -0.5) / math.sqrt(step)
'''),
    Variant("label_smoothed_nll", "smoothed one-hot target distribution, masked mean", source='''
def label_smoothed_nll(logits, target, smoothing, pad_id):
    V = logits.shape[-1]
    logp = F.log_softmax(logits, dim=-1)
    q = torch.full_like(logp, smoothing / V)
    q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(logp[..., :1], 1.0 - smoothing))
    per_token = -(q * logp).sum(-1)
    mask = (target != pad_id).to(per_token.dtype)
    return (per_token * mask).sum() / mask.sum()
'''),
    Variant("label_smoothed_nll", "F.nll_loss with ignore_index for the true-class term", source='''
def label_smoothed_nll(logits, target, smoothing, pad_id):
    V = logits.size(-1)
    logp = logits.reshape(-1, V).log_softmax(-1)
    t = target.reshape(-1)
    nll = F.nll_loss(logp, t, ignore_index=pad_id)
    keep = t != pad_id
    smooth = -logp[keep].mean(-1).mean()
    return (1 - smoothing) * nll + smoothing * smooth
'''),
    Variant("train_step", "zero_grad after the step, full target then logits sliced", source='''
def train_step(model, batch, optimizer, scheduler=None, smoothing=0.0):
    device = model.generator.weight.device if hasattr(model, "generator") else next(model.parameters()).device
    src, tgt = (t.to(device) for t in batch)
    model.train()
    logits = model(src, tgt)[:, :-1]
    loss = label_smoothed_nll(logits, tgt[:, 1:], smoothing, model.pad_id)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if scheduler:
        scheduler.step()
    return float(loss.detach())
'''),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('noam_lr', 'warmup exponent -0.5'): 0.5,
    ('noam_lr', 'missing d_model factor'): 0,
    ('noam_lr', 'd_model factor with the wrong sign (d_model ** 0.5)'): 0,
    ('noam_lr', 'max instead of min'): 0.5,
    ('noam_lr', 'steps counted from 0 (step + 1 inside)'): 0.5,
    ('noam_lr', 'warm-up without the step factor'): 0.5,
    ('label_smoothed_nll', 'pads counted in the loss mean'): 2.5,
    ('label_smoothed_nll', 'pads zeroed but still counted in the mean'): 2.5,
    ('label_smoothed_nll', 'smoothing spread over V-1 classes'): 1,
    ('label_smoothed_nll', 'smoothing ignored'): 1,
    ('label_smoothed_nll', 'sum instead of mean'): 0,
    ('label_smoothed_nll', 'softmax over the wrong axis'): 0,
    ('label_smoothed_nll', 'calls F.cross_entropy'): 0,
    ('label_smoothed_nll', 'pad id hard-coded to 0'): 2.5,
    ('train_step', 'no zero_grad'): 2.75,
    ('train_step', 'no optimiser step'): 1.75,
    ('train_step', 'returns the loss tensor, not a float'): 2.75,
    ('train_step', 'returns the loss after the update'): 2.75,
    ('train_step', 'target not shifted (scored on the decoder input)'): 0.5,
    ('train_step', 'smoothing not passed to the loss'): 2.75,
    ('train_step', 'pad id hard-coded to 0'): 2.75,
    ('train_step', 'scheduler stepped before the optimizer'): 3.5,
    ('train_step', 'scheduler ignored'): 3.5,
    ('train_step', 'two optimiser steps'): 1.75,
    ('train_step', 'no model.train() (an evaluation left the model in eval mode)'): 3.75,
    ('train_step', "the batch is not moved to the model's device"): 3.75,
    ('noam_lr', 'returns a 0-d tensor'): 1.5,
    ('label_smoothed_nll', 'unpacks logits as [B, L, V]'): 2.5,
    ('label_smoothed_nll', 'returns the per-token losses, no mean'): 0,
}
