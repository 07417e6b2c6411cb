"""Generate the `numerals` parallel corpus: Arabic integers and their Chinese readings.

    python datasets/numerals/generate.py                 # write the splits next to this file
    python datasets/numerals/generate.py --out DIR       # write them into DIR
    python datasets/numerals/generate.py --check         # regenerate in a temp dir, verify
    python datasets/numerals/generate.py --table         # print the per-length size table

Fully deterministic: every random choice is a SHA-256 of (SEED, purpose, counter), so the
files depend on nothing but this script and coursekit/numerals.py (no library RNG whose
stream could change between versions). See README.md beside this file for the datasheet.
"""

import argparse
import hashlib
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root, for `coursekit`

from coursekit.numerals import LIMIT, from_chinese, to_chinese  # noqa: E402

SEED = 20170612  # the day "Attention Is All You Need" appeared
SPLITS = ("train", "valid", "test")
MAX_DIGITS = len(str(LIMIT - 1))  # 8
# Per digit length: at most this many numbers, and at most this share of all numbers of
# that length (short lengths have few numbers: 90 with 2 digits, 900 with 3).
TEST_MAX, TEST_SHARE = 1000, 1 / 4
VALID_MAX, VALID_SHARE = 400, 1 / 10
TRAIN_MAX = 13_000
# From this many digits on, half the draws are "zero-rich" (each digit after the first is 0
# with probability 1/2): uniform draws almost never give round numbers such as 二百万.
ZERO_RICH_FROM = 5
CHECK_SAMPLE = 300_000  # random numbers round-tripped by --check, on top of 0..200,000


def hash_int(*parts: object) -> int:
    """A 256-bit integer determined by SEED and `parts`; our only source of randomness."""
    key = ":".join(str(p) for p in (SEED, *parts))
    return int.from_bytes(hashlib.sha256(key.encode()).digest(), "big")


def numbers_with_length(length: int) -> range:
    return range(0 if length == 1 else 10 ** (length - 1), 10**length)


def split_sizes(length: int) -> dict[str, int]:
    """How many numbers with `length` digits go to each split."""
    available = len(numbers_with_length(length))
    if length == 1:  # 0..9: too few to hold out; all are in train (see README)
        return {"train": available, "valid": 0, "test": 0}
    test = min(TEST_MAX, int(available * TEST_SHARE))
    valid = min(VALID_MAX, int(available * VALID_SHARE))
    train = min(TRAIN_MAX, available - test - valid)
    return {"train": train, "valid": valid, "test": test}


def draw_number(length: int, counter: int) -> int:
    """The `counter`-th random number with `length` digits (uniform or zero-rich)."""
    bits = hash_int("draw", length, counter)
    zero_rich, bits = bits & 1, bits >> 1
    if length < ZERO_RICH_FROM or not zero_rich:
        pool = numbers_with_length(length)
        return pool[bits % len(pool)]
    n, bits = 1 + bits % 9, bits // 9  # leading digit 1..9
    for _ in range(length - 1):
        is_zero, bits = bits & 1, bits >> 1
        digit, bits = (0 if is_zero else 1 + bits % 9), bits // 9
        n = 10 * n + digit
    return n


def draw_distinct(length: int, count: int) -> list[int]:
    """`count` distinct numbers with `length` digits, in the order drawn."""
    drawn: list[int] = []
    seen: set[int] = set()
    counter = 0
    while len(drawn) < count:
        n = draw_number(length, counter)
        counter += 1
        if n not in seen:
            seen.add(n)
            drawn.append(n)
    return drawn


def build_splits() -> dict[str, list[int]]:
    """The numbers of each split, disjoint, in file order (shuffled by a hash of n)."""
    splits: dict[str, list[int]] = {name: [] for name in SPLITS}
    for length in range(1, MAX_DIGITS + 1):
        sizes = split_sizes(length)
        drawn = draw_distinct(length, sum(sizes.values()))
        start = 0
        for name in ("test", "valid", "train"):  # test first: it stays put if train grows
            splits[name] += drawn[start : start + sizes[name]]
            start += sizes[name]
    return {name: sorted(nums, key=lambda n: hash_int("order", n)) for name, nums in splits.items()}


def write_splits(out_dir: Path) -> None:
    """Write {train,valid,test}.tsv (`digits<TAB>chinese`, UTF-8, LF) and SHA256SUMS."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sums = []
    for name, numbers in build_splits().items():
        text = "".join(f"{n}\t{to_chinese(n)}\n" for n in numbers)
        data = text.encode("utf-8")
        (out_dir / f"{name}.tsv").write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}.tsv\n")
    (out_dir / "SHA256SUMS").write_text("".join(sums), encoding="utf-8", newline="\n")


def length_table() -> str:
    """The per-length size table of the datasheet, in Markdown."""
    rows = ["| digits | numbers | train | valid | test |", "| ---: | ---: | ---: | ---: | ---: |"]
    totals = dict.fromkeys(SPLITS, 0)
    for length in range(1, MAX_DIGITS + 1):
        sizes = split_sizes(length)
        for name in SPLITS:
            totals[name] += sizes[name]
        cells = [len(numbers_with_length(length))] + [sizes[name] for name in SPLITS]
        rows.append(f"| {length} | " + " | ".join(f"{c:,}" for c in cells) + " |")
    rows.append(f"| all | {LIMIT:,} | " + " | ".join(f"{totals[n]:,}" for n in SPLITS) + " |")
    return "\n".join(rows) + "\n"


def verify_readings(sample_size: int = CHECK_SAMPLE) -> None:
    """Round-trip every n <= 200,000 and a random sample through the independent parser."""
    rng = random.Random(SEED)
    numbers = [*range(200_001), *(rng.randrange(LIMIT) for _ in range(sample_size))]
    for n in numbers:
        text = to_chinese(n)
        if from_chinese(text) != n:
            raise AssertionError(f"{n} reads {text!r}, which parses back as {from_chinese(text)}")


def check() -> list[str]:
    """Regenerate in a temp dir and compare with the committed files; return the problems."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        write_splits(Path(tmp))
        for name in [f"{s}.tsv" for s in SPLITS] + ["SHA256SUMS"]:
            committed = HERE / name
            if not committed.exists():
                problems.append(f"{name}: missing")
            elif committed.read_bytes() != (Path(tmp) / name).read_bytes():
                problems.append(f"{name}: differs from a fresh generation")
    for line in (HERE / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, name = line.split()
        if hashlib.sha256((HERE / name).read_bytes()).hexdigest() != digest:
            problems.append(f"{name}: checksum does not match SHA256SUMS")
    if length_table() not in (HERE / "README.md").read_text(encoding="utf-8"):
        problems.append("README.md: per-length table is out of date (see --table)")
    try:
        verify_readings()
    except AssertionError as err:
        problems.append(f"readings: {err}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    parser.add_argument("--check", action="store_true", help="verify the committed files")
    parser.add_argument("--table", action="store_true", help="print the per-length table")
    args = parser.parse_args()
    if args.table:
        print(length_table(), end="")
        return 0
    if args.check:
        problems = check()
        for problem in problems:
            print(f"FAIL {problem}")
        print("numerals: OK" if not problems else f"numerals: {len(problems)} problem(s)")
        return 1 if problems else 0
    write_splits(args.out)
    print(f"wrote {', '.join(s + '.tsv' for s in SPLITS)} and SHA256SUMS to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
