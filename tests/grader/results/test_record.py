"""grader.results.folder: the one reader and writer of a ``grade --out`` folder. One file
per student (the spec's keys, then its own); hints are kept as data beside the documented
``message``; the folder carries a schema version; a folder from before it, or from before
one result (``records/``), is read as it always was, one from a newer grader is refused by
every reader."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from grader.common.hint import Hint
from grader.outputs import class_report, feedback, gradebook, lms
from grader.results import ExerciseResult, Provenance, Report, Status, not_graded
from grader.results.folder import (
    SCHEMA,
    SPEC_KEYS,
    Folder,
    RecordError,
    grades_row,
    result_object,
    write_atomic,
)

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
    rows = [grades_row(s, r, EXERCISES) for s, r in reports.items()]
    folder.write_grades(rows, EXERCISES)
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
    assert list(data)[:len(SPEC_KEYS)] == list(spec)  # the spec's keys first, then its own
    assert {k: data[k] for k in spec} | {"exercises": None} == spec | {"exercises": None}
    assert data["schema"] == SCHEMA and set(data) - set(spec) == {"notes", "seed", "schema"}
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
    assert grades_row("a", again, EXERCISES) == grades_row("a", report, EXERCISES)


def test_the_folder_carries_its_schema(tmp_path: Path) -> None:
    folder = _write_class(tmp_path, {"ann": _report([Hint("x")])})
    assert json.loads(folder.run_json.read_text())["schema"] == SCHEMA
    assert json.loads(folder.result_path("ann").read_text())["schema"] == SCHEMA
    assert folder.schema() == SCHEMA
    assert not [p for p in tmp_path.rglob("*.tmp")], "atomic writes leave no temporary file"


def test_write_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in target.parent.iterdir()] == ["b.json"]


def _newer(folder: Folder, where: str) -> None:
    """``where``'s schema one newer: ``run.json``, ann's result, or ann's record (a result of
    before one result, without ``schema``, beside a ``records/`` file that has one)."""
    path = folder.run_json if where == "run" else folder.result_path("ann")
    data = json.loads(path.read_text())
    if where == "record":
        path.write_text(json.dumps({k: data[k] for k in SPEC_KEYS}))
        path, data = folder.record_path("ann"), {}
        path.parent.mkdir()
    data["schema"] = SCHEMA + 1
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("where", ["run", "result", "record"])
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
        assert grades_row(student, again, EXERCISES) == grades_row(student, report, EXERCISES)
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
BEFORE = Path(__file__).parents[2] / "fixtures" / "graded_before_one_result"


def test_a_students_two_files_become_one_file_of_the_same_report(tmp_path: Path) -> None:
    """A result and its record of before one result are read as one report, which is
    written back as one file: the two files' objects, one after the other (the record's
    schema now the file's), byte for byte; read again, the same report."""
    old, new = Folder(BEFORE), Folder(tmp_path)
    students = sorted(p.stem for p in (BEFORE / "results").glob("*.json"))
    assert students == ["ann", "bob", "cy", "dan", "eve"]
    for student in students:
        report = old.read_result(student)
        assert report is not None and report.made is not None and report.hints_recorded
        new.write_result(student, report)
        result, record = (json.loads(path.read_text(encoding="utf-8"))
                          for path in (old.result_path(student), old.record_path(student)))
        assert "schema" not in result and record.pop("schema") == 1
        one = json.dumps(result | record | {"schema": SCHEMA}, ensure_ascii=False)
        assert new.result_path(student).read_text(encoding="utf-8") == one
        assert new.read_result(student) == report
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "results", *(f"results/{s}.json" for s in students)]  # no records/
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


def test_a_graded_folder_has_one_file_per_student(tmp_path: Path) -> None:
    reports = {"ann": _report([Hint("x", "m")]), "blank": _report([])}
    folder = _write_class(tmp_path, reports)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json")) == [
        "results/ann.json", "results/blank.json", "run.json"]
    data = json.loads(folder.result_path("blank").read_text(encoding="utf-8"))
    assert list(data)[:len(SPEC_KEYS)] == list(SPEC_KEYS)
    assert data["untouched"] is True and data["schema"] == SCHEMA  # the provenance beside them
    for student, report in reports.items():
        again = folder.read_result(student)
        assert again is not None and again.made == Provenance(untouched=student == "blank")
        assert again.to_dict() == report.to_dict() | again.made.to_dict()


def test_the_one_serialiser_round_trips_to_the_same_report_and_object() -> None:
    made = Provenance({"file": "a.ipynb", "sha256": "sha256:0", "timestamp": None}, {"grader": "g"},
                      "2026-01-01T00:00:00Z", False)
    for report in (replace(_report([Hint("a", "m"), Hint("raised KeyError", None, "error")]), seed=3,
                           made=made, notes=["a note"]),
                   not_graded("x", LESSON, {"dot_scores": 2.0}, Status.UNREADABLE, "Broken JSON.")):
        data = json.loads(json.dumps(report.to_dict()))
        again = Report.from_dict(data)
        assert again.to_dict() == data  # the object, key for key and in order
        assert list(again.to_dict()) == list(data)
        assert Report.from_dict(again.to_dict()) == again  # a report read back: identity


def test_a_rerun_into_a_folder_of_before_one_result_leaves_it_readable(tmp_path: Path) -> None:
    """A new result written into an old folder is one file (its record goes); the kept
    students' results are still read with their records; grades.csv and every reader take
    the mixed folder; once every student is regraded, records/ is gone."""
    from grader.classgrade.classroom import write_csv

    out = tmp_path / "out"
    shutil.copytree(BEFORE, out)
    folder, kept = Folder(out), Folder(BEFORE)
    students = sorted(p.stem for p in (BEFORE / "results").glob("*.json"))
    dan = kept.read_result("dan")
    assert dan is not None
    folder.write_result("dan", dan)
    assert not folder.record_path("dan").exists() and folder.record_path("ann").is_file()
    assert [folder.read_result(s) for s in students] == [kept.read_result(s) for s in students]
    statuses = write_csv(out, students, ["dot_scores", "softmax", "attention"])
    assert statuses == {"ann": "ok", "bob": "ok", "cy": "missing", "dan": "unreadable", "eve": "ok"}
    assert folder.grades_csv.read_bytes() == (BEFORE / "grades.csv").read_bytes()
    assert {s.student_id: s.untouched for s in class_report.load(out).students}["bob"]
    for student in students:
        report = folder.read_result(student)
        assert report is not None
        folder.write_result(student, report)
    assert not (out / "records").exists()
    assert [folder.read_result(s) for s in students] == [kept.read_result(s) for s in students]


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
