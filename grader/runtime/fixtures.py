"""Trusted helper objects the hidden tests ask to build next to the submission.

Each factory takes plain values (and handles) and returns an object that stays on the
submission side, e.g. an optimizer over a student's module. Lessons add their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def sgd(module: Any, lr: float = 0.1, momentum: float = 0.0) -> Any:
    import torch

    return torch.optim.SGD(module.parameters(), lr=lr, momentum=momentum)


def adam(module: Any, lr: float = 1e-3) -> Any:
    import torch

    return torch.optim.Adam(module.parameters(), lr=lr)


FIXTURES: dict[str, Callable[..., Any]] = {
    "sgd": sgd,
    "adam": adam,
}


# --- lesson 08: a scripted model for greedy_decode ---------------------------------------

def copy_model(vocab: int, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, junk_id: int = 3) -> Any:
    """A stand-in for a trained Transformer whose greedy translation is known exactly: it
    copies its source, one token per step (bos → src[0], src[0] → src[1], ...).

    It has the lesson-08 interface: ``encode(src, src_mask=None)``, ``decode(tgt, memory,
    tgt_mask=None, memory_mask=None)``, ``generator`` (the identity: ``decode`` already
    returns logits), ``forward(src, tgt)``, ``pad_id``. Position i predicts ``src[i]`` only if
    the target so far is what the model itself predicted (bos, src[0], ...); it predicts
    ``junk_id`` past the end of the source, after a wrong prefix, and wherever the source's
    padding is visible through ``memory_mask`` (as a real model's output would be disturbed).
    It is built in training mode, as a model fresh from training is, and counts the calls
    made while it is still in training mode (``calls_in_training``: dropout would be on).
    """
    import torch
    from torch import nn

    class CopyModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pad_id = pad_id
            self.vocab = vocab
            self.generator = nn.Identity()
            self.dummy = nn.Parameter(torch.zeros(1))  # so that next(model.parameters()) works
            self.calls_in_training = 0

        def _called(self) -> None:
            # a plain int: set past nn.Module.__setattr__'s checks (each decode call counts)
            object.__setattr__(self, "calls_in_training", self.calls_in_training + int(self.training))

        def encode(self, src: Any, src_mask: Any = None) -> Any:
            self._called()
            return nn.functional.one_hot(src.long(), vocab).float() + 0.0 * self.dummy

        def decode(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None) -> Any:
            self._called()
            src = memory.argmax(-1)
            B, Lt = tgt.shape
            Ls = src.shape[1]
            if memory_mask is None:
                visible = torch.ones(B, Lt, Ls, dtype=torch.bool, device=tgt.device)
            else:
                try:
                    visible = torch.broadcast_to(torch.as_tensor(memory_mask).bool(), (B, 1, Lt, Ls))[:, 0]
                except RuntimeError:
                    raise ValueError(f"memory_mask of shape {list(memory_mask.shape)} does not "
                                     f"broadcast to [B, H, Lt, Ls] = [{B}, H, {Lt}, {Ls}]") from None
            pad_seen = (visible & (src == pad_id)[:, None, :]).any(-1)          # [B, Lt]
            expected = torch.cat([torch.full((B, 1), bos_id, device=tgt.device), src], 1)
            width = min(Lt, Ls + 1)
            prefix_ok = torch.zeros(B, Lt, dtype=torch.bool, device=tgt.device)
            prefix_ok[:, :width] = (tgt[:, :width] == expected[:, :width]).long().cumprod(1).bool()
            token = torch.full((B, Lt), junk_id, dtype=torch.long, device=tgt.device)
            n = min(Lt, Ls)
            token[:, :n] = src[:, :n]
            token = torch.where(prefix_ok & ~pad_seen, token, torch.full_like(token, junk_id))
            return 10.0 * nn.functional.one_hot(token, vocab).float() + 0.0 * self.dummy

        def forward(self, src: Any, tgt: Any) -> Any:
            mask = (src != pad_id)[:, None, None, :]
            return self.generator(self.decode(tgt, self.encode(src, mask), memory_mask=mask))

    return CopyModel()


FIXTURES["copy_model"] = copy_model


# --- lesson 09: a small trusted model and a scheduler for train_step -------------------

def _tiny_seq2seq_class() -> Any:
    import torch
    from torch import nn

    class TinySeq2Seq(nn.Module):
        """A deterministic, differentiable seq2seq stand-in with the lesson-08 call
        ``model(src, tgt) -> logits [B, Lt, V]`` and ``pad_id``. Position i sees the mean of
        the non-pad source embeddings and target tokens 0..i only (causal), so a shifted
        or unshifted target changes the loss. It counts the forward passes made in evaluation
        mode (``calls_in_eval``: dropout would be off while training)."""

        def __init__(self, src_vocab: int, tgt_vocab: int, d: int = 8, pad_id: int = 0, seed: int = 0):
            super().__init__()
            self.pad_id = pad_id
            self.calls_in_eval = 0
            self.src_embed = nn.Embedding(src_vocab, d)
            self.tgt_embed = nn.Embedding(tgt_vocab, d)
            self.out = nn.Linear(d, tgt_vocab)
            g = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for p in self.parameters():
                    p.copy_(torch.randn(p.shape, generator=g) * 0.7)

        def forward(self, src: Any, tgt: Any) -> Any:
            self.calls_in_eval += int(not self.training)
            keep = (src != self.pad_id).unsqueeze(-1).float()
            context = (self.src_embed(src) * keep).sum(1) / keep.sum(1).clamp(min=1.0)
            h = torch.tanh(self.tgt_embed(tgt) + context[:, None, :])
            steps = torch.arange(1, tgt.shape[1] + 1, device=tgt.device, dtype=h.dtype)
            return self.out(h.cumsum(1) / steps[None, :, None])

    return TinySeq2Seq


def tiny_seq2seq(src_vocab: int, tgt_vocab: int, d: int = 8, pad_id: int = 0, seed: int = 0) -> Any:
    return _tiny_seq2seq_class()(src_vocab, tgt_vocab, d, pad_id, seed)


def step_lr(optimizer: Any, step_size: int = 1, gamma: float = 0.5) -> Any:
    import torch

    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)


FIXTURES["tiny_seq2seq"] = tiny_seq2seq
FIXTURES["step_lr"] = step_lr


# --- lesson 11: the models that generation is graded on ---------------------------------

def decoder_lm(state: dict[str, Any], vocab: int, d_model: int, n_head: int, n_layer: int, d_ff: int,
               max_len: int, pad_id: int = 0) -> Any:
    """Lesson 10's ``DecoderLM`` (the course's, from ``coursekit.earlier``) holding the weights
    ``state``, in eval mode. It counts the token positions it embeds (``embedded``), so that a
    test can tell whether generation reused a key/value cache or ran the whole sequence again at
    every step."""
    from coursekit.earlier import lesson_code

    model = lesson_code("10").DecoderLM(vocab, d_model=d_model, n_head=n_head, n_layer=n_layer, d_ff=d_ff,
                                        max_len=max_len, dropout=0.0, pad_id=pad_id)
    model.load_state_dict(state)
    model.eval()
    model.embedded = 0

    def count(module: Any, args: tuple[Any, ...], output: Any) -> None:
        ids = args[0] if args else None
        if ids is not None and hasattr(ids, "shape") and ids.dim() >= 1:
            model.embedded += int(ids.shape[-1])  # ids [B, L]: L positions

    model.embed.register_forward_hook(count)
    return model


def transformer(state: dict[str, Any], src_vocab: int, tgt_vocab: int, d_model: int, n_head: int,
                n_layer: int, d_ff: int, max_len: int, pad_id: int = 0) -> Any:
    """Lesson 08's ``Transformer`` (the course's) holding the weights ``state``, in eval mode."""
    from coursekit.earlier import lesson_code

    model = lesson_code("08").Transformer(src_vocab, tgt_vocab, d_model=d_model, n_head=n_head,
                                          num_encoder_layers=n_layer, num_decoder_layers=n_layer, d_ff=d_ff,
                                          dropout=0.0, max_len=max_len, pad_id=pad_id)
    model.load_state_dict(state)
    return model.eval()


def table_model(tables: list[dict[str, Any]], vocab: int, pad_id: int = 0) -> Any:
    """A stand-in for a trained lesson-08 ``Transformer`` whose next-token logits are read from
    tables, so that which hypothesis beam search must find is known exactly.

    Source row ``b`` picks ``tables[src[b, 0]]``: ``{"logits": {"1,5,7": [V floats], ...},
    "default": [V floats], "after_eos": [V floats], "eos": id}``; the logits after a target
    prefix (bos first) are its entry, else ``after_eos`` once the prefix holds eos, else
    ``default`` (lists of floats or float32 tensors). It has the lesson-08 interface: ``encode(src, src_mask=None)`` (one-hot
    sources as the memory), ``decode(tgt, memory, tgt_mask=None, memory_mask=None)`` (the
    logits of every position: ``generator`` is an identity ``nn.Linear``), ``forward(src, tgt)``,
    ``pad_id``."""
    import torch
    from torch import nn

    n_src = len(tables)

    def rows(table: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:  # each list of logits once
        return ({key: torch.as_tensor(v, dtype=torch.float32) for key, v in table["logits"].items()},
                torch.as_tensor(table["default"], dtype=torch.float32),
                torch.as_tensor(table["after_eos"], dtype=torch.float32))

    table_rows = [rows(table) for table in tables]

    class TableModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pad_id = pad_id
            self.generator = nn.Linear(vocab, vocab, bias=False)  # the identity, with out_features
            self.generator.weight.data.copy_(torch.eye(vocab))
            self.dummy = nn.Parameter(torch.zeros(1))  # so that next(model.parameters()) works
            self._seen: dict[tuple[int, tuple[int, ...]], Any] = {}  # (table, prefix) -> its logits
            self.looked_up = 0  # the prefixes whose last logits were looked up (a test counts them)

        def encode(self, src: Any, src_mask: Any = None) -> Any:
            return nn.functional.one_hot(src.long().clamp(0, n_src - 1), n_src).float() + 0.0 * self.dummy

        def decode(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None) -> Any:
            which = memory[:, 0].argmax(-1).tolist()                     # the source's first token
            out = [self._rows(which[b], tuple(row)) for b, row in enumerate(tgt.tolist())]
            return torch.stack(out).to(tgt.device) + 0.0 * self.dummy

        def _rows(self, table: int, row: tuple[int, ...]) -> Any:
            """The logits [len(row), V] of every position of ``row``, remembered per prefix: a
            search asks for each prefix's one token more, so each call builds one row."""
            if (table, row) in self._seen:
                return self._seen[table, row]
            if not row:
                return torch.zeros(0, vocab)
            by_prefix, default, after_eos = table_rows[table]
            before = self._rows(table, row[:-1])
            object.__setattr__(self, "looked_up", self.looked_up + 1)  # a plain int: past nn.Module's checks
            ended = any(t == tables[table]["eos"] for t in row[1:])
            last = after_eos if ended else by_prefix.get(",".join(map(str, row)), default)
            self._seen[table, row] = rows = torch.cat([before, last[None]])
            return rows

        def forward(self, src: Any, tgt: Any) -> Any:
            mask = (src != pad_id)[:, None, None, :]
            return self.generator(self.decode(tgt, self.encode(src, mask), memory_mask=mask))

    return TableModel()


FIXTURES["decoder_lm"] = decoder_lm
FIXTURES["transformer"] = transformer
FIXTURES["table_model"] = table_model


def generator(seed: int) -> Any:
    """A ``torch.Generator`` seeded with ``seed`` (a generator cannot cross as a value)."""
    import torch

    return torch.Generator().manual_seed(int(seed))


FIXTURES["generator"] = generator
