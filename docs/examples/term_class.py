"""A class of lesson 01 with every case a term brings, built from this checkout's notebooks.

    python docs/examples/term_class.py term-class            # SUBMITTED layout, 11 students
    python docs/examples/term_class.py --canvas-zip FILE.zip  # a Canvas "Download Submissions" zip

The README's "Running a term" and the tests (the ``term`` fixtures of tests/conftest.py)
grade it. Students: alice (the reference answers, handed in late but with an extension),
bob (a ``softmax`` that loops forever for ``axis=0``), carol (the notebook untouched), dave
(an LMS download's name, ``... (1).ipynb``), erin (a zip extracted whole: a folder inside
the folder, and macOS's ``__MACOSX`` shadow file), frank (two different notebooks, both
worked on), gina (a notebook cut short: invalid JSON), hank (late: nbgrader's
``timestamp.txt``), ivan (an empty folder), judy (the untouched notebook beside her worked
copy ``...-Copy1.ipynb``), mallory (the reference answers with a locked test cell
rewritten).
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from coursekit import catalogue  # noqa: E402

LESSON = "01_attention_by_hand"
SOLUTION = catalogue.get(LESSON).solution()
BLANK = catalogue.get(LESSON).student()
LATE = "2026-03-04 10:00:00.000000 UTC"  # after the example due date of deadlines.toml


def hung() -> dict:
    """The reference notebook whose softmax loops forever for axis=0."""
    nb = catalogue.read_json(SOLUTION)
    for cell in nb["cells"]:
        if catalogue.grade_id(cell) == "softmax":
            source = catalogue.cell_source(cell)
            cell["source"] = source.replace(
                "    x = np.asarray(x, dtype=np.float64)\n",
                "    while axis == 0:  # an infinite loop, for axis=0 only\n        pass\n"
                "    x = np.asarray(x, dtype=np.float64)\n")
            assert cell["source"] != source, "the softmax cell changed: update term_class.py"
    return nb


def tampered() -> dict:
    """The reference notebook with its locked softmax test cell rewritten."""
    nb = catalogue.read_json(SOLUTION)
    for cell in nb["cells"]:
        if catalogue.grade_id(cell) == "test_softmax":
            cell["source"] = 'print("softmax: all good")\n'
    return nb


def put(path: Path, content: dict | bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        path.write_text(json.dumps(content), encoding="utf-8")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def build_class(submitted: Path) -> list[str]:
    nb = f"{LESSON}.ipynb"
    solution = SOLUTION.read_bytes()
    put(submitted / "alice" / LESSON / nb, solution)
    put(submitted / "alice" / LESSON / "timestamp.txt", LATE)
    put(submitted / "bob" / LESSON / nb, hung())
    put(submitted / "carol" / LESSON / nb, BLANK.read_bytes())
    put(submitted / "dave" / LESSON / f"{LESSON} (1).ipynb", solution)
    put(submitted / "erin" / LESSON / "submission" / LESSON / nb, solution)
    put(submitted / "erin" / LESSON / "__MACOSX" / f"._{nb}", b"\x00\x05\x16\x07 resource fork")
    put(submitted / "frank" / LESSON / nb, solution)
    put(submitted / "frank" / LESSON / f"{LESSON}-Copy1.ipynb", hung())
    put(submitted / "gina" / LESSON / nb, solution[:3000])
    put(submitted / "hank" / LESSON / nb, solution)
    put(submitted / "hank" / LESSON / "timestamp.txt", LATE)
    (submitted / "ivan").mkdir(parents=True, exist_ok=True)
    put(submitted / "judy" / LESSON / nb, BLANK.read_bytes())
    put(submitted / "judy" / LESSON / f"{LESSON}-Copy1.ipynb", solution)
    put(submitted / "mallory" / LESSON / nb, tampered())
    return sorted(p.name for p in submitted.iterdir())


def canvas_zip(path: Path) -> list[str]:
    """Canvas's names: <lastfirst>_[LATE_]<user id>_<submission id>_<file as uploaded>,
    ``-1`` before the extension for a resubmission."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = {f"doejane_123456_7890123_{LESSON}.ipynb": SOLUTION.read_bytes(),
             f"smithbob_LATE_234567_7890124_{LESSON}-1.ipynb": SOLUTION.read_bytes(),
             f"leeann_345678_7890125_{LESSON} (1).ipynb": BLANK.read_bytes(),
             "leeann_345678_7890125_notes.txt": b"my notes\n"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return list(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="where to build the SUBMITTED layout")
    parser.add_argument("--canvas-zip", metavar="FILE", help="write a Canvas-style zip instead")
    args = parser.parse_args()
    if args.canvas_zip:
        names = canvas_zip(Path(args.canvas_zip))
        print(f"wrote {args.canvas_zip}: {len(names)} files")
    elif args.folder:
        students = build_class(Path(args.folder))
        print(f"wrote {args.folder}/: {len(students)} students ({', '.join(students)})")
    else:
        parser.error("give a folder, or --canvas-zip FILE")


if __name__ == "__main__":
    main()
