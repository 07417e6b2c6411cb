"""grader.record: the one reader and writer of a ``grade --out`` folder. Hints are kept as
data beside the documented ``message``; the folder carries a schema version; a folder from
before it is read as it always was, one from a newer grader is refused by every reader."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from grader.hint import Hint
from grader.outputs import class_report, feedback, gradebook, lms
from grader.record import SCHEMA, Folder, RecordError, result_object, write_atomic
from grader.results import ExerciseResult, Provenance, Report, Status, not_graded
from grader.results.render import csv_row, csv_table

LESSON = "01_attention_by_hand"
EXERCISES = ["dot_scores", "softmax"]


def _report(softmax: list[Hint], points: float = 0.0) -> Report:
    return Report(f"x/{LESSON}/{LESSON}.ipynb", LESSON,
                  [ExerciseResult("dot_scores", 2.0, 2.0),
                   ExerciseResult("softmax", points, 4.0, softmax)])


def _write_class(out: Path, reports: dict[str, Report], legacy: bool = False) -> Folder:
    """A folder as ``grade`` writes it (``legacy``: as graders before the schema wrote it)."""
    folder = Folder(out)
    folder.prepare()
    for student, report in reports.items():
        if legacy:
            written = report.as_dict() | {"status": str(report.status)}  # no hints as data
            folder.result_path(student).write_text(json.dumps(written), encoding="utf-8")
            folder.record_path(student).parent.mkdir(parents=True, exist_ok=True)
            folder.record_path(student).write_text(json.dumps({"untouched": False}), encoding="utf-8")
        else:
            folder.write_result(student, replace(report, made=Provenance(untouched=student == "blank")))
        folder.write_feedback(student, LESSON, "<p>feedback</p>")
    rows = [csv_row(s, r, EXERCISES) for s, r in reports.items()]
    folder.write_grades(csv_table(rows, EXERCISES))
    run = {"lesson": LESSON, "students": len(reports)}
    if legacy:
        folder.run_json.write_text(json.dumps(run), encoding="utf-8")
    else:
        folder.write_run(run)
    return folder


def test_hints_are_kept_as_data_beside_the_documented_message() -> None:
    report = _report([Hint("rows of the weights should sum to 1 (max 0.25 off)", "softmax_sum_all"),
                      Hint("a symptom", None), Hint("another", None)])
    data = result_object(report)
    spec = report.as_dict() | {"status": str(report.status)}  # the check object plus status
    assert {k: v for k, v in data.items()} | {"exercises": None} == spec | {"exercises": None}
    for written, contract in zip(data["exercises"], spec["exercises"], strict=True):
        assert {k: v for k, v in written.items() if k != "hints"} == contract  # only hints added
        assert written["message"] == "; ".join(h["text"] for h in written["hints"])
    (softmax,) = [x for x in data["exercises"] if x["name"] == "softmax"]
    fold = {"id": "+{folded} related check{s} failed", "args": {"folded": "2", "s": "s"},
            "text": "+2 related checks failed"}  # a message: its id and arguments beside its text
    assert softmax["hints"] == [{"text": "rows of the weights should sum to 1 (max 0.25 off) "
                                         "(+2 related checks failed)",
                                 "mistake": "softmax_sum_all", "kind": "diagnosis",
                                 "id": "{message} ({detail})",
                                 "args": {"message": "rows of the weights should sum to 1 (max 0.25 off)",
                                          "detail": fold}}]


def test_a_result_read_back_keeps_each_hints_mistake_and_kind() -> None:
    report = _report([Hint("first", "mistake_a"), Hint("second", "mistake_b"),
                      Hint("raised ValueError", None, "error")])
    again = Report.from_dict(json.loads(json.dumps(result_object(report))))
    shown = again.exercises[1].hints
    assert [(str(h), h.mistake, h.kind) for h in shown] == [
        (str(h), h.mistake, h.kind) for h in report.exercises[1].hints]
    assert again.as_dict() == report.as_dict()
    assert csv_row("a", again, EXERCISES) == csv_row("a", report, EXERCISES)


def test_the_folder_carries_its_schema(tmp_path: Path) -> None:
    folder = _write_class(tmp_path, {"ann": _report([Hint("x")])})
    assert json.loads(folder.run_json.read_text())["schema"] == SCHEMA
    assert json.loads(folder.record_path("ann").read_text())["schema"] == SCHEMA
    assert folder.schema() == SCHEMA
    assert not [p for p in tmp_path.rglob("*.tmp")], "atomic writes leave no temporary file"


def test_write_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in target.parent.iterdir()] == ["b.json"]


def _newer(folder: Folder, where: str) -> None:
    path = folder.run_json if where == "run" else folder.record_path("ann")
    data = json.loads(path.read_text())
    data["schema"] = SCHEMA + 1
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("where", ["run", "record"])
def test_every_reader_refuses_a_folder_of_a_newer_schema(tmp_path: Path, where: str) -> None:
    folder = _write_class(tmp_path / "out", {"ann": _report([Hint("x")])})
    _newer(folder, where)
    newer = rf"written by a newer grader \(folder schema {SCHEMA + 1}; this grader reads up to {SCHEMA}\)"
    with pytest.raises(class_report.ReportError, match=newer):
        class_report.load(folder.path)
    with pytest.raises(feedback.FeedbackError, match=newer):
        if where == "run":
            feedback.to_folders([folder.path], tmp_path / "pages")
        else:
            (tmp_path / "course" / "submitted" / "ann" / LESSON).mkdir(parents=True)
            (tmp_path / "course" / "submitted" / "ann" / LESSON / "submission_secret.txt").write_text("s")
            feedback.to_nbgrader([folder.path], tmp_path / "course")
    if where == "run":  # the LMS export reads grades.csv (and run.json) only
        with pytest.raises(lms.LmsError, match=newer):
            lms.read_lesson(folder.path)
        with pytest.raises(RecordError, match=newer):
            folder.read_grades()


@pytest.mark.parametrize("schema", ["1", -1, True, 1.5])
def test_a_schema_that_grade_never_writes_is_refused(tmp_path: Path, schema: object) -> None:
    folder = _write_class(tmp_path, {"ann": _report([Hint("x")])})
    folder.run_json.write_text(json.dumps({"lesson": LESSON, "schema": schema}))
    with pytest.raises(RecordError, match="is not one `grade` writes"):
        folder.read_grades()


def test_a_folder_from_before_the_schema_is_read_as_it_always_was(tmp_path: Path) -> None:
    reports = {"ann": _report([Hint("softmax over axis 0 (max 3 off)", "softmax_axis")]),
               "bob": _report([Hint("softmax over axis 0 (max 7 off)", "softmax_axis")])}
    legacy = _write_class(tmp_path / "old", reports, legacy=True)
    assert legacy.schema() == 0
    data = class_report.load(legacy.path)
    assert all(not s.hint_data for s in data.students)
    assert [s.hints["softmax"] for s in data.students] == [
        "softmax over axis 0 (max 3 off)", "softmax over axis 0 (max 7 off)"]
    (group,) = class_report.common_failures(data)["softmax"]  # the old way: numbers left out
    assert group["count"] == 2 and group["students"] == ["ann", "bob"]
    assert lms.read_lesson(legacy.path).rows["ann"]["status"] == "ok"


def test_the_class_report_groups_hints_by_mistake_id(tmp_path: Path) -> None:
    reports = {
        # one mistake, told in words that differ beyond numbers: one group
        "ann": _report([Hint("the weights' rows sum to 3, not 1", "softmax_sum_all")]),
        "bob": _report([Hint("np.sum(e) sums every entry: use axis", "softmax_sum_all")]),
        # two mistakes whose sentences differ only in numbers: two groups
        "cy": _report([Hint("off by 2 on axis 0", "softmax_axis_ignored")]),
        "di": _report([Hint("off by 3 on axis 0", "softmax_global_max")]),
        # no mistake id: by the text, numbers left out
        "ed": _report([Hint("returned 4 rows", None)]),
        "fa": _report([Hint("returned 5 rows", None)]),
        "ok": _report([], 4.0),
    }
    data = class_report.load(_write_class(tmp_path, reports).path)
    groups = class_report.common_failures(data)["softmax"]
    assert sorted((g["count"], tuple(g["students"])) for g in groups) == [
        (1, ("cy",)), (1, ("di",)), (2, ("ann", "bob")), (2, ("ed", "fa"))]
    assert data.students[0].hint_data["softmax"][0].mistake == "softmax_sum_all"


def test_grades_csv_row_survives_the_record_unchanged(tmp_path: Path) -> None:
    reports = {"ann": _report([Hint("x", "m")]),
               "gone": not_graded("gone/x", LESSON, {"dot_scores": 2.0, "softmax": 4.0},
                                  Status.MISSING, "No submission.")}
    folder = _write_class(tmp_path, reports)
    for student, report in reports.items():
        again = folder.read_result(student)
        assert again is not None
        assert csv_row(student, again, EXERCISES) == csv_row(student, report, EXERCISES)
    assert [r["status"] for r in folder.read_grades().rows] == ["ok", "missing"]


def test_grade_refuses_to_write_into_a_folder_of_a_newer_schema(tmp_path: Path) -> None:
    import subprocess
    import sys

    from support import ROOT

    submitted = tmp_path / "submitted"
    (submitted / "ann" / LESSON).mkdir(parents=True)
    folder = _write_class(tmp_path / "out", {"ann": _report([Hint("x")])})
    _newer(folder, "run")
    before = {p: p.read_bytes() for p in folder.path.rglob("*") if p.is_file()}
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
                           "--out", str(folder.path), "--deadlines", "none"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "written by a newer grader" in proc.stderr and "Traceback" not in proc.stderr
    assert {p: p.read_bytes() for p in folder.path.rglob("*") if p.is_file()} == before


#: A class graded by the grader before issue 53's one result (``results/`` and ``records/``
#: written from two models): ann (full marks, a timestamp.txt), bob (the handout, untouched),
#: cy (missing), dan (broken JSON), eve (softmax's sum over the whole array).
BEFORE = Path(__file__).parent / "fixtures" / "graded_before_one_result"


def test_a_students_two_files_are_one_report_written_back_byte_for_byte(tmp_path: Path) -> None:
    old, new = Folder(BEFORE), Folder(tmp_path)
    students = sorted(p.stem for p in (BEFORE / "results").glob("*.json"))
    assert students == ["ann", "bob", "cy", "dan", "eve"]
    for student in students:
        report = old.read_result(student)
        assert report is not None and report.made is not None and report.hints_recorded
        new.write_result(student, report)
        assert new.result_path(student).read_bytes() == old.result_path(student).read_bytes()
        assert new.record_path(student).read_bytes() == old.record_path(student).read_bytes()
    eve, bob, ann = (old.read_result(s) for s in ("eve", "bob", "ann"))
    assert eve is not None and bob is not None and ann is not None
    (hint,) = eve.exercises[1].hints
    assert not isinstance(hint, str) and (hint.mistake, hint.kind) == ("softmax_sum_all", "diagnosis")
    assert bob.made is not None and bob.made.untouched
    assert ann.made is not None and ann.made.submission == {
        "file": "ann/01_attention_by_hand/01_attention_by_hand.ipynb",
        "sha256": ann.made.submission["sha256"], "timestamp": "2026-03-01 10:00:00 UTC"}
    assert isinstance(ann.seed, int) and ann.made.graded_with["isolation"] == "none"


def test_a_report_round_trips_through_its_one_serialiser() -> None:
    made = Provenance({"file": "a.ipynb", "sha256": "sha256:0", "timestamp": None}, {"grader": "g"},
                      "2026-01-01T00:00:00Z", True)
    report = replace(_report([Hint("first", "mistake_a"), Hint("raised ValueError", None, "error")]),
                     notes=["a call hung"], seed=7, made=made)
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == replace(report, exercises=[replace(x, failures=x.hints) for x in report.exercises])
    assert [h.as_dict() for h in again.exercises[1].failures] == [
        {"text": "first (+1 related check failed)", "mistake": "mistake_a", "kind": "diagnosis",
         "id": "{message} ({detail})", "args": {"message": "first", "detail": {
             "id": "+{folded} related check{s} failed", "args": {"folded": "1", "s": ""},
             "text": "+1 related check failed"}}}]


def test_every_reader_takes_a_folder_written_before_one_result(tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(BEFORE, out)
    data = class_report.load(out)
    students = {s.student_id: s for s in data.students}
    assert students["eve"].hint_data["softmax"][0].mistake == "softmax_sum_all"
    assert students["bob"].untouched and not students["ann"].untouched
    assert {"count": 1, "students": ["eve"]}.items() <= next(
        g for g in class_report.common_failures(data)["softmax"] if g["students"] == ["eve"]).items()
    assert {s: r["status"] for s, r in lms.read_lesson(out).rows.items()} == {
        "ann": "ok", "bob": "ok", "cy": "missing", "dan": "unreadable", "eve": "ok"}
    roster = tmp_path / "roster.csv"
    roster.write_text("Name,login\nAnn,ann\nEve,eve\n", encoding="utf-8")
    book = gradebook.build([out], roster, key="login")
    assert {row[0]: row[3] for row in book.rows} == {"Ann": "10", "Eve": "6"}
    assert len(feedback.to_folders([out], tmp_path / "pages").copied) == 5
    submitted = tmp_path / "course" / "submitted" / "ann" / LESSON
    submitted.mkdir(parents=True)
    (submitted / "submission_secret.txt").write_text("s", encoding="utf-8")
    done = feedback.to_nbgrader([out], tmp_path / "course")
    assert done.copied == ["ann/01_attention_by_hand"]
    assert (tmp_path / "course" / "feedback" / "ann" / LESSON / f"{LESSON}.html").is_file()


def test_a_rerun_keeps_the_results_of_a_folder_written_before_one_result(tmp_path: Path) -> None:
    """plan_run reads what each kept result was made from out of the old records: the missing
    student and the unchanged broken notebook are kept; a changed notebook is regraded."""
    from grader.classgrade.classroom import Options, plan_run

    out, submitted = tmp_path / "out", tmp_path / "submitted"
    shutil.copytree(BEFORE, out)
    for student in ("cy", "dan"):
        (submitted / student).mkdir(parents=True)
    (submitted / "dan" / LESSON).mkdir()
    (submitted / "dan" / LESSON / f"{LESSON}.ipynb").write_text('{"cells": [\n', encoding="utf-8")
    plan = plan_run(submitted, Options(lesson=LESSON, out=out))
    assert (plan.todo, plan.kept, plan.changed) == ([], ["cy", "dan"], [])
    (submitted / "dan" / LESSON / f"{LESSON}.ipynb").write_text('{"cells": []}\n', encoding="utf-8")
    plan = plan_run(submitted, Options(lesson=LESSON, out=out))
    assert (plan.todo, plan.changed) == (["dan"], ["dan"])
