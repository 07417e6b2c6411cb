"""``python -m grader report DIR``: a class graded by ``grade`` (reference, blank, buggy,
timeout, unreadable, missing) gives one self-contained page that renders in the real
browser the suite already uses, with no console error, and whose numbers are those of
``grades.csv``; similarity flags show both listings side by side."""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from browser_support import _missing, browser_page
from support import ROOT, lesson_path, solution_path

pytestmark = pytest.mark.e2e

LESSON = "01_attention_by_hand"


def needs_browser(test):
    """Drives chromium: marked ``browser``, skipped without one (test_browser says why)."""
    return pytest.mark.browser(pytest.mark.skipif(bool(_missing), reason=_missing or "")(test))


def put(submitted: Path, student: str, lesson: str, data: bytes | None) -> None:
    folder = submitted / student / lesson
    folder.mkdir(parents=True)
    if data is not None:
        (folder / f"{lesson}.ipynb").write_bytes(data)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, Path]:
    """A lesson 01 class graded by `grade`: every kind of outcome."""
    tmp = tmp_path_factory.mktemp("class")
    submitted, out = tmp / "submitted", tmp / "out"
    reference = solution_path(LESSON).read_bytes()
    nb = json.loads(reference)
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "softmax":
            cell["source"] = "".join(cell["source"]).replace("axis=axis, keepdims=True)\n    e",
                                                             "keepdims=True)\n    e")
    looping = json.loads(reference)
    looping["cells"].insert(2, {"cell_type": "code", "execution_count": None, "id": "loop",
                                "metadata": {}, "outputs": [], "source": "while True:\n    pass\n"})
    put(submitted, "alice", LESSON, reference)
    put(submitted, "amir", LESSON, reference)
    put(submitted, "bob", LESSON, lesson_path(LESSON).read_bytes())
    put(submitted, "carol", LESSON, json.dumps(nb).encode())
    put(submitted, "chen", LESSON, json.dumps(nb).encode())
    put(submitted, "dave", LESSON, None)
    put(submitted, "erin", LESSON, b"{broken json")
    put(submitted, "frank", LESSON, json.dumps(looping).encode())
    cheat = json.loads(lesson_path(LESSON).read_bytes())  # blank answers, one cell of its own
    cheat["cells"].append({"cell_type": "code", "execution_count": None, "id": "cheat", "metadata": {},
                           "outputs": [], "source": "from coursekit import earlier\n"})
    put(submitted, "hana", LESSON, json.dumps(cheat).encode())
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
                           "--out", str(out), "--jobs", "2", "--timeout", "20", "--deadlines", "none"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return submitted, out


def grades(out: Path) -> list[dict[str, str]]:
    with (out / "grades.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def report(out: Path, *extra: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "grader", "report", str(out), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_report_summary_and_self_contained_page(graded) -> None:
    submitted, out = graded
    assert json.loads((out / "run.json").read_text())["submitted"] == str(submitted.resolve())
    text = report(out)  # the notebooks from the folder run.json names
    rows = grades(out)
    scores = [float(r["score"]) for r in rows]
    assert text.startswith(f"wrote {out / 'report.html'}: 9 student(s), {LESSON}")
    assert f"mean {statistics.fmean(scores):.1f}, median {statistics.median(scores):g} of 10" in text
    assert "status: ok 6, " in text and all(f"{s} 1" in text for s in ("timeout", "unreadable", "missing"))
    assert "every exercise of 01_attention_by_hand is too short" in text
    assert "protections active" in (out / "report.html").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and not re.search(r"(src|href)=\"(https?:)?//", page)
    assert page.count("<svg") == 2
    for row in rows:
        assert f'data-student="{row["student_id"]}" data-score="{float(row["score"]):g}" ' \
               f'data-status="{row["status"]}"' in page


def test_student_ids_and_hints_are_text_not_markup(tmp_path) -> None:
    """A student id and a hint are whatever the student made them: the page shows them
    escaped, in every table they appear in."""
    from grader.outputs.class_report import write_report

    lesson, sid = "01_attention_by_hand", "<script>evil&"
    hint = "hint: <script>alert(1)</script> got <b>"
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    with (out / "grades.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["student_id", "lesson", "score", "max_score", "status", "message", "softmax"])
        writer.writerow([sid, lesson, 0.0, 4.0, "ok", "<i>graded</i>", 0.0])
    (out / "results" / f"{sid}.json").write_text(json.dumps({
        "notebook": "x", "lesson": lesson, "score": 0.0, "max_score": 4.0, "status": "ok",
        "exercises": [{"name": "softmax", "points": 0.0, "max_points": 4.0, "passed": False,
                       "message": hint}]}))
    write_report(out)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<i>" not in page and "got <b>" not in page
    assert page.count("&lt;script&gt;evil&amp;") >= 3  # the failures, look-at and grades tables
    assert "&lt;script&gt;alert(1)&lt;/script&gt; got &lt;b&gt;" in page


def test_a_class_graded_with_deadlines_is_reported(graded, tmp_path) -> None:
    """The late-work columns follow the exercises in grades.csv: they are not exercises
    (issue 24: `report` crashed on them, as the README's own term example showed)."""
    from grader.outputs.class_report import load

    submitted, out = graded
    late = tmp_path / "late-out"
    shutil.copytree(out, late)
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson",
                           LESSON, "--out", str(late), "--jobs", "2", "--timeout", "20",
                           "--deadlines", str(ROOT / "docs" / "examples" / "deadlines.toml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "late_submission_penalty" in next(csv.reader((late / "grades.csv").open()))
    text = report(late)
    assert text.startswith(f"wrote {late / 'report.html'}: 9 student(s), {LESSON}")
    assert load(late).exercises == ["dot_scores", "softmax", "attention"]


def test_only_a_notebook_as_handed_out_is_called_untouched(graded) -> None:
    """bob handed in the blank handout; hana the blank handout with a cell of her own (the
    report used to call both untouched, from the hints' words)."""
    from grader.outputs.class_report import load, to_look_at

    _, out = graded
    why = {row["student"]: " ".join(row["reasons"]) for row in to_look_at(load(out), {})}
    assert "untouched" in why["bob"]
    assert "untouched" not in why["hana"] and "scored 0 of 10" in why["hana"]
    assert "untouched" not in why.get("carol", "")


def test_not_a_graded_folder_is_refused(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "grader", "report", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("grader report: cannot read")


@needs_browser
def test_report_renders_in_the_browser_and_matches_grades_csv(graded, tmp_path, request) -> None:
    submitted, out = graded
    report(out, "--submitted", str(submitted))
    rows = {r["student_id"]: r for r in grades(out)}
    results = {s: json.loads((out / "results" / f"{s}.json").read_text()) for s in rows}
    max_points = {x["name"]: x["max_points"] for x in results["alice"]["exercises"]}
    with browser_page(tmp_path, request) as page:
        problems, requests = [], []
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto((out / "report.html").as_uri())
        assert page.title() == f"Class report: {LESSON}"
        # every student of grades.csv, with the same score and status
        shown = page.eval_on_selector_all(
            "#scores tr[data-student]",
            "rows => rows.map(r => [r.dataset.student, r.dataset.score, r.dataset.status])")
        assert shown == [[s, f"{float(r['score']):g}", r["status"]] for s, r in rows.items()]
        # summary cards
        scores = [float(r["score"]) for r in rows.values()]
        card = lambda key: page.locator(f'#summary [data-key="{key}"]').inner_text()  # noqa: E731
        assert card("students") == str(len(rows))
        assert card("mean") == f"{statistics.fmean(scores):.1f}"
        assert card("median") == f"{statistics.median(scores):g}"
        assert card("full_marks") == str(sum(1 for s in scores if s >= 10))
        assert card("status-timeout") == "1" and card("status-ok") == "6"
        # per-exercise full / partial / zero counts
        for name, top in max_points.items():
            points = [float(r[name]) for r in rows.values()]
            row = page.locator(f'#exercises tr[data-exercise="{name}"]')
            assert row.get_attribute("data-full") == str(sum(p >= top for p in points))
            assert row.get_attribute("data-zero") == str(sum(p <= 0 for p in points))
        # the notebooks that did not run to the end, and who to look at
        unfinished = page.eval_on_selector_all("#unfinished tr[data-student]",
                                               "rows => rows.map(r => [r.dataset.student, r.dataset.status])")
        assert unfinished == [[s, r["status"]] for s, r in rows.items() if r["status"] != "ok"]
        look = page.locator("#look").inner_text()
        assert "bob" in look and "untouched" in look and "frank" in look and "timeout" in look
        softmax = page.locator('[data-failures="softmax"]').inner_text()
        assert "carol" in softmax and "chen" in softmax and "alice" not in softmax
        # the plots are drawn, not just present
        for plot in ("#histogram svg", "#exercise-chart svg"):
            box = page.locator(plot).bounding_box()
            assert box and box["width"] > 300 and box["height"] > 100, plot
        assert "No pair of submissions is flagged." in page.locator("body").inner_text()
        assert not problems, problems
        assert all(url.startswith("file://") for url in requests), requests


@needs_browser
def test_similarity_pair_is_shown_side_by_side(tmp_path, request) -> None:
    """Lesson 08: kim hands in an independent Transformer, lee a disguised copy of it; ada
    the reference, bo another independent one. Only kim and lee are flagged for their
    Transformer; all four hand in the reference's EncoderLayer and DecoderLayer, character
    for character, which is flagged as identical code (one flag per student after ada)."""
    from similarity_cases import copied_cases, independent_cases

    lesson = "08_transformer"
    cases = [c for c in independent_cases() if c.exercise == "Transformer" and c.source]
    original, copy = next((a, b) for a, b in copied_cases(cases) if "by hand" in a.label)
    other = next(c for c in cases if c.label != original.label and "independent" in c.label)
    submitted, out = tmp_path / "submitted", tmp_path / "out"
    notebooks = {"ada": json.loads(solution_path(lesson).read_text()), "kim": original.notebook,
                 "lee": copy.notebook, "bo": other.notebook}
    exercises = ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer", "greedy_decode"]
    (out / "results").mkdir(parents=True)
    with (out / "grades.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["student_id", "lesson", "score", "max_score", "status", "message", *exercises])
        for student, nb in notebooks.items():
            put(submitted, student, lesson, json.dumps(nb).encode())
            writer.writerow([student, lesson, 20.0, 20.0, "ok", "Graded: 20 of 20 points.", 3, 4, 4, 5, 4])
            (out / "results" / f"{student}.json").write_text(json.dumps({
                "notebook": "x", "lesson": lesson, "score": 20.0, "max_score": 20.0, "status": "ok",
                "exercises": [{"name": x, "points": p, "max_points": p, "passed": True, "message": ""}
                              for x, p in zip(exercises, (3, 4, 4, 5, 4), strict=True)]}))
    text = report(out, "--submitted", str(submitted))
    assert "similarity flags: 7" in text
    with browser_page(tmp_path, request) as page:
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto((out / "report.html").as_uri())
        identical = page.locator(".pair:has([data-identical])")
        assert identical.count() == 6
        assert sorted(identical.nth(i).get_attribute("data-exercise") for i in range(6)) == \
            ["DecoderLayer"] * 3 + ["EncoderLayer"] * 3
        pairs = page.locator('.pair[data-exercise="Transformer"]')
        assert pairs.count() == 1
        pair = pairs.first
        assert pair.get_attribute("data-pair") == "kim|lee" and pair.get_attribute("data-exercise") == "Transformer"
        sides = pair.locator("pre.code")
        assert sides.count() == 2
        for i in range(2):
            assert sides.nth(i).is_visible()
            assert sides.nth(i).locator(".shared").count() >= 5
        assert "class Transformer" in sides.nth(0).inner_text()
        look = page.locator("#look").inner_text()
        assert "Transformer: code unusually like lee's" in look and "code identical to ada's" in look
        assert not problems, problems
    shutil.rmtree(submitted)  # without the notebooks the page says so instead of comparing
    assert "Similarity was not checked: the submitted notebooks were not found" in report(out)


@pytest.mark.slow
def test_the_terms_report(term) -> None:
    """`report` on the term graded with deadlines (issue 24: it crashed on the late columns)."""
    from grader.outputs.class_report import load, to_look_at

    proc = subprocess.run([sys.executable, "-m", "grader", "report", str(term["out"])], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "11 student(s)" in proc.stdout and "status: ok 8, ambiguous 1, unreadable 1, missing 1" in proc.stdout
    data = load(term["out"])
    assert {s.student_id: s.score for s in data.students}["hank"] == 8.0  # after the penalty
    why = {row["student"]: " ".join(row["reasons"]) for row in to_look_at(data, {})}
    assert {"frank", "gina", "ivan"} <= set(why)
