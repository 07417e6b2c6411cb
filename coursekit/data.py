"""Data utilities the lessons import: find and load datasets, a character vocabulary, batches."""

import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import torch

from . import settings

DIRECTIONS = ("digits2zh", "zh2digits")
NUMERALS_SPLITS = ("train", "valid", "test")


def dataset_dir(name: str = "numerals") -> Path:
    """The folder of dataset `name`, found without relying on the current working directory.

    Looks in $COURSE_DATASETS/<name> if that variable is set, else in `datasets/<name>` of
    the repository this module lives in (nbgrader runs kernels in autograded/<student>/...).
    """
    root, origin = settings.datasets_root(), "$COURSE_DATASETS"
    if root is None:
        root, origin = Path(__file__).resolve().parents[1] / "datasets", "the repository"
    folder = root / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"dataset {name!r} not found at {folder} (from {origin}); set COURSE_DATASETS "
            "to the course's datasets/ folder"
        )
    return folder


def load_parallel_tsv(
    path: str | os.PathLike, reverse: bool = False, max_pairs: int | None = None
) -> list[tuple[str, str]]:
    """Read `source<TAB>target` lines (UTF-8) into pairs, skipping blank lines.

    `reverse=True` returns (target, source); `max_pairs` keeps only the first pairs.
    """
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise ValueError(
                    f"{path}:{line_number}: expected exactly one tab (source<TAB>target), "
                    f"found {len(fields) - 1}: {line[:60]!r}"
                )
            pairs.append((fields[1], fields[0]) if reverse else (fields[0], fields[1]))
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    return pairs


def load_numerals(split: str, direction: str = "digits2zh") -> list[tuple[str, str]]:
    """Pairs of the numerals dataset: `split` in train/valid/test, `direction` digits2zh or zh2digits."""
    if split not in NUMERALS_SPLITS:
        raise ValueError(f"split must be one of {NUMERALS_SPLITS}, got {split!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    path = dataset_dir("numerals") / f"{split}.tsv"
    return load_parallel_tsv(path, reverse=direction == "zh2digits")


def oversample_by_length(
    pairs: Sequence[tuple[str, str]],
    min_per_length: int = 2000,
    key: Callable[[tuple[str, str]], int] | None = None,
) -> list[tuple[str, str]]:
    """`pairs`, followed by whole extra copies of every length group under `min_per_length`.

    Lengths are source lengths unless `key` says otherwise (for numerals in the zh2digits
    direction, `key=lambda pair: len(pair[1])` groups by digit count). The numerals train
    split holds only 10, 59 and 585 numbers of 1, 2 and 3 digits among 60,254: trained on it
    as is, a model can score over 99% while reading every 2-digit number as 3 digits.
    """
    key = key or (lambda pair: len(pair[0]))
    groups: dict[int, list[tuple[str, str]]] = {}
    for pair in pairs:
        groups.setdefault(key(pair), []).append(pair)
    extra = []
    for length in sorted(groups):
        group = groups[length]
        copies = -(-min_per_length // len(group))  # ceil
        extra += group * (copies - 1)
    return [*pairs, *extra]


class CharVocab:
    """Character-level vocabulary; ids 0..3 are <pad>, <bos>, <eos>, <unk>."""

    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, itos: Sequence[str]):
        if tuple(itos[: len(self.SPECIALS)]) != self.SPECIALS:
            raise ValueError(f"the first tokens must be {self.SPECIALS}")
        self.itos = list(itos)
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate tokens in vocabulary")

    @classmethod
    def build(cls, texts: Iterable[str]) -> "CharVocab":
        """A vocabulary of every character in `texts`, in sorted (deterministic) order."""
        chars = sorted(set().union(*map(set, texts)))
        return cls([*cls.SPECIALS, *chars])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self.stoi.get(ch, self.unk_id) for ch in text]
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Iterable[int] | torch.Tensor, strip_special: bool = True) -> str:
        """Text of `ids`. With strip_special, stop at the first <eos> and drop other specials;
        without, spell every token out (specials as <pad>, <bos>, ...)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            if strip_special:
                if i == self.eos_id:
                    break
                if i < len(self.SPECIALS):
                    continue
            out.append(self.itos[i])
        return "".join(out)

    def to_dict(self) -> dict:
        """A JSON-friendly form, to save with a checkpoint."""
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, state: dict) -> "CharVocab":
        return cls(state["itos"])


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)


def make_batches(
    pairs: Sequence[tuple[str, str]],
    src_vocab: CharVocab,
    tgt_vocab: CharVocab,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    by_length: bool = True,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield (src [B, Ls], tgt [B, Lt]) LongTensors, right-padded with 0.

    src is the source ids + <eos>; tgt is <bos> + target ids + <eos>. Without shuffle the
    batches keep the order of `pairs` (for evaluation). With shuffle the order depends only
    on `seed`, and, with `by_length`, pairs of similar length are batched together (less
    padding): shuffle, sort chunks of 50 batches by length, cut into batches, shuffle the
    batches. With `by_length=False` every batch is a random sample of the pairs.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    order = list(range(len(pairs)))
    if shuffle:
        rng = random.Random(seed)
        rng.shuffle(order)
    if shuffle and by_length:
        chunk = 50 * batch_size
        for start in range(0, len(order), chunk):
            order[start : start + chunk] = sorted(
                order[start : start + chunk], key=lambda i: (len(pairs[i][0]), len(pairs[i][1]))
            )
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    for batch in batches:
        src = [src_vocab.encode(pairs[i][0], add_eos=True) for i in batch]
        tgt = [tgt_vocab.encode(pairs[i][1], add_bos=True, add_eos=True) for i in batch]
        yield _pad(src, src_vocab.pad_id), _pad(tgt, tgt_vocab.pad_id)


def accuracy_by_length(
    sources: Sequence[str], predictions: Sequence[str], references: Sequence[str]
) -> dict[int, tuple[int, int]]:
    """Exact-match counts per source length: {length: (correct, total)}, sorted by length.

    For numerals in the zh2digits direction, pass the references as `sources` to group by
    digit count.
    """
    if not len(sources) == len(predictions) == len(references):
        raise ValueError("sources, predictions and references must have the same length")
    counts: dict[int, list[int]] = {}
    for source, prediction, reference in zip(sources, predictions, references, strict=True):
        tally = counts.setdefault(len(source), [0, 0])
        tally[0] += prediction == reference
        tally[1] += 1
    return {length: (c[0], c[1]) for length, c in sorted(counts.items())}
