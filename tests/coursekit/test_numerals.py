"""Tests of the numerals dataset: readings, parser, splits, loaders, vocabulary, batches."""

import hashlib
import importlib.util
import itertools
import random
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run from anywhere, installed or not

from coursekit.data import (  # noqa: E402
    CharVocab,
    accuracy_by_length,
    dataset_dir,
    load_numerals,
    load_parallel_tsv,
    make_batches,
    oversample_by_length,
)
from coursekit.numerals import from_chinese, to_chinese  # noqa: E402

NUMERALS = ROOT / "datasets" / "numerals"
SPLITS = ("train", "valid", "test")


def load_generator():
    spec = importlib.util.spec_from_file_location("numerals_generate", NUMERALS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPEC_EXAMPLES = {  # COURSE_SPEC and the brief
    0: "零",
    20: "二十",
    110: "一百一十",
    1234: "一千二百三十四",
    10000: "一万",
    10005: "一万零五",
    100010: "十万零一十",
    2000000: "二百万",
    10001000: "一千万一千",
    1000100: "一百万零一百",
}

RULE_CASES = {
    # rule 1: bare 十 only at the very start of the reading, else 一十
    10: "十",
    15: "十五",
    100000: "十万",
    150000: "十五万",
    110000: "十一万",
    115: "一百一十五",
    10010: "一万零一十",
    1010: "一千零一十",
    10100000: "一千零一十万",
    # rule 2: a run of zeros is one 零, trailing zeros are silent
    101: "一百零一",
    1001: "一千零一",
    1005: "一千零五",
    1050: "一千零五十",
    1200: "一千二百",
    9000: "九千",
    20010000: "二千零一万",
    # rule 3: 零 across 万 only when the lower group is non-zero and under 1000
    10999: "一万零九百九十九",
    11000: "一万一千",
    10000100: "一千万零一百",
    10001001: "一千万一千零一",
    30000000: "三千万",
    20000001: "二千万零一",
    # rule 4: 二, never 两
    2: "二",
    22222222: "二千二百二十二万二千二百二十二",
    # the ends of the range
    99999999: "九千九百九十九万九千九百九十九",
}


@pytest.mark.parametrize("n, text", [*SPEC_EXAMPLES.items(), *RULE_CASES.items()])
def test_reading_and_parse(n, text):
    assert to_chinese(n) == text
    assert from_chinese(text) == n


def test_out_of_range_and_types():
    for bad in (-1, 10**8):
        with pytest.raises(ValueError):
            to_chinese(bad)
    for bad in (1.0, "5", True):
        with pytest.raises(TypeError):
            to_chinese(bad)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "两",
        "两千",
        "一十五",
        "一十",
        "十十",
        "一一",
        "一百五",
        "一万五",
        "一百零",
        "零五",
        "一零五",
        "一百零一十",
        "一千零十",
        "二十百",
        "百",
        "万",
        "一万万",
        "一万零",
        "一亿",
        "12",
        " 一",
        "一千零零一",
        "零万",
    ],
)
def test_parser_rejects_malformed(text):
    with pytest.raises(ValueError):
        from_chinese(text)


def test_round_trip_exhaustive_to_200000():
    for n in range(200_001):
        assert from_chinese(to_chinese(n)) == n, n


def test_round_trip_random_sample_whole_range():
    rng = random.Random(2024)
    for n in (rng.randrange(10**8) for _ in range(200_000)):
        assert from_chinese(to_chinese(n)) == n, n


def test_parser_accepts_only_canonical_readings():
    # Every string of up to 4 numeral characters, and mutations of random readings: whatever
    # the parser accepts must be exactly the generator's reading of that number.
    alphabet = "零一二三四五六七八九十百千万"
    candidates = ["".join(t) for k in range(1, 5) for t in itertools.product(alphabet, repeat=k)]
    rng = random.Random(7)
    for _ in range(20_000):
        text = to_chinese(rng.randrange(10**8))
        i = rng.randrange(len(text) + 1)
        candidates += [text[:i] + rng.choice(alphabet) + text[i:], text[:i] + text[i + 1 :]]
    accepted = 0
    for text in candidates:
        try:
            n = from_chinese(text)
        except ValueError:
            continue
        accepted += 1
        assert to_chinese(n) == text, (text, n)
    assert accepted > 1000  # the check is not vacuous


def read_split(name):
    return load_parallel_tsv(NUMERALS / f"{name}.tsv")


def test_split_files_are_consistent():
    numbers = {}
    for name in SPLITS:
        pairs = read_split(name)
        for digits, chinese in pairs:
            assert digits == str(int(digits)) and to_chinese(int(digits)) == chinese
        numbers[name] = [int(d) for d, _ in pairs]
        assert len(set(numbers[name])) == len(numbers[name]), f"duplicates in {name}"
    for a, b in itertools.combinations(SPLITS, 2):
        assert not set(numbers[a]) & set(numbers[b]), f"{a} and {b} share numbers"
    for name in ("valid", "test"):
        lengths = {len(str(n)) for n in numbers[name]}
        assert lengths == set(range(2, 9)), (name, sorted(lengths))
    assert set(range(10)) <= set(numbers["train"])
    assert 50_000 <= len(numbers["train"]) <= 80_000


def test_regeneration_is_byte_identical_and_matches_checksums(tmp_path):
    load_generator().write_splits(tmp_path)
    for name in [f"{s}.tsv" for s in SPLITS] + ["SHA256SUMS"]:
        assert (tmp_path / name).read_bytes() == (NUMERALS / name).read_bytes(), name
    for line in (NUMERALS / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, name = line.split()
        assert hashlib.sha256((NUMERALS / name).read_bytes()).hexdigest() == digest, name


def test_datasheet_table_is_current():
    table = load_generator().length_table()
    assert table in (NUMERALS / "README.md").read_text(encoding="utf-8")


def test_dataset_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_DATASETS", raising=False)
    monkeypatch.chdir(tmp_path)  # must not depend on the working directory
    assert dataset_dir() == NUMERALS
    (tmp_path / "numerals").mkdir()
    monkeypatch.setenv("COURSE_DATASETS", str(tmp_path))
    assert dataset_dir() == tmp_path / "numerals"
    with pytest.raises(FileNotFoundError, match="COURSE_DATASETS"):
        dataset_dir("no_such_dataset")


def test_load_numerals_directions():
    forward = load_numerals("valid")
    backward = load_numerals("valid", direction="zh2digits")
    assert forward[0][0].isdigit() and backward == [(t, s) for s, t in forward]
    with pytest.raises(ValueError):
        load_numerals("dev")
    with pytest.raises(ValueError):
        load_numerals("test", direction="zh2en")


def test_load_parallel_tsv(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("1\t一\n\n20\t二十\r\n   \n300\t三百\n", encoding="utf-8")
    assert load_parallel_tsv(path) == [("1", "一"), ("20", "二十"), ("300", "三百")]
    assert load_parallel_tsv(path, reverse=True)[1] == ("二十", "20")
    assert load_parallel_tsv(path, max_pairs=2) == [("1", "一"), ("20", "二十")]
    path.write_text("1\t一\n2 二\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r":2: expected exactly one tab"):
        load_parallel_tsv(path)
    path.write_text("1\t一\t壹\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r":1:"):
        load_parallel_tsv(path)


def test_char_vocab():
    vocab = CharVocab.build(["一万零五", "二十"])
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    assert vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab.itos[4:] == sorted("一万零五二十") and len(vocab) == 10
    assert CharVocab.build(["二十", "一万零五"]).itos == vocab.itos  # order-independent
    ids = vocab.encode("二十五", add_bos=True, add_eos=True)
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id and len(ids) == 5
    assert vocab.decode(ids) == "二十五"
    assert vocab.decode(ids + [vocab.stoi["一"], 0]) == "二十五"  # stops at eos
    assert vocab.decode(torch.tensor(ids)) == "二十五"
    assert vocab.encode("三") == [vocab.unk_id]
    assert vocab.decode([1, 4, 0], strip_special=False) == "<bos>" + vocab.itos[4] + "<pad>"
    restored = CharVocab.from_dict(vocab.to_dict())
    assert restored.itos == vocab.itos and restored.encode("一万") == vocab.encode("一万")
    with pytest.raises(ValueError):
        CharVocab(["a", "b"])


def test_make_batches():
    pairs = load_numerals("valid")[:300]
    src_vocab = CharVocab.build(s for s, _ in pairs)
    tgt_vocab = CharVocab.build(t for _, t in pairs)
    batches = list(make_batches(pairs, src_vocab, tgt_vocab, batch_size=32, shuffle=False))
    assert [len(src) for src, _ in batches] == [32] * 9 + [12]
    src, tgt = batches[0]
    assert src.dtype == tgt.dtype == torch.long and src.shape[0] == tgt.shape[0] == 32
    assert (tgt[:, 0] == tgt_vocab.bos_id).all() and (src != tgt_vocab.bos_id).all()
    for row, (source, target) in enumerate(pairs[:32]):
        assert src_vocab.decode(src[row]) == source and tgt_vocab.decode(tgt[row]) == target
        n_src, n_tgt = len(source), len(target) + 2
        assert src[row, n_src] == src_vocab.eos_id and (src[row, n_src + 1 :] == 0).all()
        assert tgt[row, n_tgt - 1] == tgt_vocab.eos_id and (tgt[row, n_tgt:] == 0).all()
    assert src.shape[1] == max(len(s) for s, _ in pairs[:32]) + 1

    def run(seed):
        return [
            (s.tolist(), t.tolist())
            for s, t in make_batches(pairs, src_vocab, tgt_vocab, 32, seed=seed)
        ]

    first, again, other = run(0), run(0), run(1)
    assert first == again and first != other
    seen = sorted(src_vocab.decode(row) for s, _ in first for row in torch.tensor(s))
    assert seen == sorted(s for s, _ in pairs)  # each pair exactly once


def test_make_batches_by_length_or_mixed():
    pairs = load_numerals("valid")[:640]
    src_vocab = CharVocab.build(s for s, _ in pairs)
    tgt_vocab = CharVocab.build(t for _, t in pairs)

    def lengths(by_length):
        batches = list(make_batches(pairs, src_vocab, tgt_vocab, 64, seed=3, by_length=by_length))
        seen = sorted(src_vocab.decode(row) for src, _ in batches for row in src)
        assert seen == sorted(s for s, _ in pairs)  # each pair exactly once
        return [{len(src_vocab.decode(row)) for row in src} for src, _ in batches]

    assert max(map(len, lengths(True))) <= 3  # neighbouring digit counts (2-4 are rare)
    assert min(map(len, lengths(False))) >= 4  # a random sample: many digit counts


def test_accuracy_by_length():
    counts = accuracy_by_length(
        ["12", "34", "5", "678"], ["a", "x", "c", "d"], ["a", "b", "c", "d"]
    )
    assert counts == {1: (1, 1), 2: (1, 2), 3: (1, 1)}
    with pytest.raises(ValueError):
        accuracy_by_length(["1"], [], ["a"])


def test_oversample_by_length():
    pairs = [("1", "一"), ("2", "二"), ("10", "十"), ("123", "一百二十三")] + [("1234", "x")] * 5
    out = oversample_by_length(pairs, min_per_length=5)
    assert out[: len(pairs)] == pairs
    counts = {n: sum(len(s) == n for s, _ in out) for n in (1, 2, 3, 4)}
    assert counts == {1: 6, 2: 5, 3: 5, 4: 5}
    by_target = oversample_by_length([("十", "10"), ("一百", "100")], 3, key=lambda p: len(p[1]))
    assert by_target.count(("十", "10")) == 3 and by_target.count(("一百", "100")) == 3
    train = oversample_by_length(load_numerals("train"))
    assert sum(len(s) == 2 for s, _ in train) >= 2000
