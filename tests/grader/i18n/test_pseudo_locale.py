"""A third language is one file (issue 53): a made-up language, ``xx`` (each translation the
English in full-width letters between ⟦ ⟧, its ``{fields}`` kept), is one ``.po`` catalogue
written from the source's ids into a folder of its own; then everything a student or an
instructor reads is rendered in it -- every message of the catalogue, the grading of the planted
bugs, the blank and the reference notebooks of two lessons, ``grader check``'s text, the feedback
page, ``grade``'s summary, its progress bar and sandbox plan, the class report and Gradescope's
results -- and no English is left but the values
(numbers, names, paths, the student's own words, Python's exception text)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import string
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

import pytest

from coursekit import catalogue
from grader import i18n
from grader.common.hint import Hint
from grader.i18n import Message, catalogues
from grader.i18n.message import parts
from grader.results import ExerciseResult, Report, Status, not_graded

pytestmark = pytest.mark.slow  # grades two lessons in full: over 30 s on 2 cores

PSEUDO = "xx"
FULL_WIDTH = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in string.ascii_letters})
LESSONS = ["01_attention_by_hand", "05_layer_norm"]


def pseudo(template: str) -> str:
    """``template`` with every letter outside its fields made full-width, between ⟦ ⟧."""
    out = "".join("{" + value + "}" if kind == "field"
                  else value.translate(FULL_WIDTH).replace("{", "{{").replace("}", "}}")
                  for kind, value in parts(template))
    return f"⟦{out}⟧"


@pytest.fixture()
def xx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The made-up language's one file, the only catalogue of this test's locale folder."""
    entries = {key: catalogues.Entry(pseudo(key)) for key in catalogues.source_templates()}
    catalogues.write(PSEUDO, entries, root=tmp_path / "locale")
    monkeypatch.setattr(catalogues, "LOCALE_DIR", tmp_path / "locale")
    monkeypatch.setattr(i18n, "LANGUAGES", catalogues.languages())
    catalogues.table.cache_clear()
    yield PSEUDO
    catalogues.table.cache_clear()


def _values(message: object) -> list[str]:
    """The arguments of a message (and of the messages in it) that are values, not words."""
    if not isinstance(message, Message):
        return []
    found: list[str] = []
    for value in message.args.values():
        found += _values(value) if isinstance(value, Message) else [value]
    return found


def _without(text: str, values: Iterable[str]) -> str:
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, " ")
    return text


def _english(text: str, values: Iterable[str] = ()) -> list[str]:
    """Runs of two English words left in ``text`` once ``values`` are taken out."""
    return re.findall(r"[A-Za-z]{2,}[,;:.'’)]?[ \t]+[(]?[A-Za-z]{2,}", _without(text, values))


def test_the_language_is_found_by_its_file(xx: str) -> None:
    assert xx in i18n.LANGUAGES and i18n.choose(xx) == xx
    assert i18n.render(i18n.msg("total"), xx) == "⟦ｔｏｔａｌ⟧"


def test_every_message_of_the_catalogue_renders_with_no_english_left(xx: str) -> None:
    ids = list(catalogues.source_templates())
    assert len(ids) > 500
    for key in ids:
        sample = Message(key, {name: "7" for name in catalogues.fields(key)})
        text, left = i18n.render_checked(sample, xx)
        assert not left and not re.search(r"[A-Za-z]", text.replace("7", "")), (key, text)


def _graded(lesson: str) -> list[Report]:
    """The reports of the lesson's blank and reference notebooks and of its planted bugs."""
    from planted import modules

    from grader.check.engine import grade_in_process

    entry = catalogue.get(lesson)
    notebooks = [catalogue.read_json(entry.student()), catalogue.read_json(entry.solution())]
    module = next(m for m in modules() if m.LESSON == lesson)
    base = json.dumps(notebooks[1])
    notebooks += [variant.apply(json.loads(base)) for variant in module.BUGS]
    return [grade_in_process(nb, lesson, seed=20260101) for nb in notebooks]


def _report_values(report: Report) -> list[str]:
    values = [report.notebook, report.lesson, *(e.name for e in report.exercises)]
    for e in report.exercises:
        for hint in e.failures:
            values += _values(hint.text)
    return values


@pytest.mark.parametrize("lesson", LESSONS)
def test_grading_a_lesson_says_everything_in_the_new_language(xx: str, lesson: str) -> None:
    """Every hint of the planted bugs, the blank and the reference notebooks is a message
    that renders in full; ``grader check``'s text and the feedback page have no English left."""
    from grader.outputs.render import feedback_html, to_html, to_text

    reports = _graded(lesson)
    assert any(e.failures for r in reports for e in r.exercises)
    for report in reports:
        for e in report.exercises:
            for hint in e.failures:
                assert isinstance(hint.text, Message), f"a hint without an id: {hint.text!r}"
                text, left = i18n.render_checked(hint.text, xx)
                assert not left, (hint.text, left)
                assert not re.search(r"[A-Za-z]{2,}", _without(text, _values(hint.text))), text
        shown = i18n.localize(report, xx)
        values = _report_values(report)
        for page in (to_text(shown), _page_text(to_html(shown)), _page_text(feedback_html(shown, "s1"))):
            assert not _english(page, values), (_english(page, values), page)


def _page_text(page: str) -> str:
    body = re.sub(r"<(svg|code|style|script)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"<[^>]+>", "\n", body)


def test_the_feedback_page_and_its_notes_say_everything_in_the_new_language(xx: str) -> None:
    from datetime import UTC, datetime, timedelta

    from grader.classgrade.late import Lateness
    from grader.outputs.render import feedback_html

    due = datetime(2026, 3, 2, 22, 59, tzinfo=UTC)
    for late in (timedelta(0), timedelta(days=1, hours=11)):
        note = Lateness(due + late, due, late, 0.2 if late else 0.0).describe()
        report = Report("hank.ipynb", "01_attention_by_hand",
                        [ExerciseResult("softmax", points=4.0, max_points=4.0)], notes=[note])
        page = _page_text(feedback_html(i18n.localize(report, xx), "hank", penalty=0.8 if late else 0.0))
        assert not _english(page, ["hank.ipynb", "01_attention_by_hand", "softmax", "UTC"]), page


def test_grade_summary_and_class_report_say_everything_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``grade``'s summary (each line rendered as ``cli`` prints it) and ``report.html`` in
    the class's language, which ``COURSE_LANG`` names."""
    from grader.classgrade.classroom import Options, RunSummary, summary_lines
    from grader.outputs.class_report import write_report
    from grader.results.folder import Folder, grades_row

    monkeypatch.setenv("COURSE_LANG", xx)
    lesson = "10_decoder_only"
    hint = i18n.msg("rope_angles should return two tensors, (cos, sin)")
    folder = Folder(tmp_path / "out")
    folder.prepare()
    wrong = Report(f"s1/{lesson}/{lesson}.ipynb", lesson,
                   [ExerciseResult("rope_angles", 0.25, 2.0, [Hint(hint)]), ExerciseResult("lm_loss", 2.0, 2.0)])
    gone = not_graded(f"s2/{lesson}/{lesson}.ipynb", lesson, {"rope_angles": 2.0, "lm_loss": 2.0}, Status.MISSING,
                      i18n.msg("No submission: no notebook of {lesson} in {student}/ (nbgrader's layout: "
                               "{canonical}).", lesson=lesson, student="s2", canonical=f"s2/{lesson}/{lesson}.ipynb"))
    for student, report in (("s1", wrong), ("s2", gone)):
        folder.write_result(student, report)
    names = ["rope_angles", "lm_loss"]
    folder.write_grades([grades_row("s1", wrong, names), grades_row("s2", gone, names)], names)
    with contextlib.redirect_stdout(io.StringIO()):
        path, summary = write_report(folder.path)
    page = path.read_text(encoding="utf-8")
    values = [lesson, "s1", "s2", *names, str(folder.path), f"s2/{lesson}/{lesson}.ipynb", f"s1/{lesson}/{lesson}.ipynb"]
    assert f'<html lang="{xx}">' in page
    assert not _english(_page_text(page), values), _english(_page_text(page), values)
    assert not _english(summary, values), summary

    opts = Options(lesson=lesson, out=tmp_path / "out")
    run = RunSummary(graded=3, reused=2, seconds=4.5, per_submission=[1.0, 2.0], protections=["bwrap"],
                     missing={"memory-cap": "no cgroup"}, changed=["s1"], other_settings={"s2": "x"},
                     waiting=["s3"], statuses={"s4": "ambiguous", "s1": "ok"})
    t = i18n.words(i18n.class_language(None, ["en"]))
    for line in summary_lines(run, opts):
        said = t(line)
        assert not _english(said, [*_values(line), "bwrap", "memory-cap", "no cgroup"]), (line, said)


def _said_without_english(lines: Iterable[Message | str], said: str, more: Iterable[str] = ()) -> None:
    values = [v for line in lines for v in _values(line)] + list(more)
    assert said and not _english(said, values), (_english(said, values), said)


def test_the_sandbox_plan_says_everything_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``grade``'s plan lines (each protection, how it is met or why it is missing), on this
    machine and on one without any mechanism; the probe's own reasons are the system's words."""
    from grader.sandbox.probe import plan

    for without in ("", "all"):
        monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", without)
        shown = plan("auto")
        reasons = [str(v) for v in shown.unavailable.values()]
        _said_without_english(shown.lines(), shown.describe(xx), reasons)
        assert "MISSING" not in shown.describe(xx) and "protections active" not in shown.describe(xx)


def test_checks_sandbox_notes_say_everything_in_the_new_language(xx: str) -> None:
    """What ``grader check`` says on stderr when the sandbox could not start or lacks a
    protection."""
    from grader.check.launch import sandbox_notes

    for source in (SimpleNamespace(unavailable="bwrap: Operation not permitted", missing={}),
                   SimpleNamespace(unavailable="", missing={"memory-cap": "no cgroup", "no-network": "x"})):
        notes = sandbox_notes(source)  # type: ignore[arg-type]
        assert notes
        for note in notes:
            _said_without_english([note], i18n.render(note, xx), ["python -m grader selftest"])


def test_the_progress_bar_says_its_label_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.classgrade.classroom import Options, progress_label

    monkeypatch.setenv("COURSE_LANG", xx)
    label = progress_label(Options(lesson="10_decoder_only", out=tmp_path))
    assert label.startswith("⟦") and "10_decoder_only" in label and "grading" not in label


def test_gradescope_says_everything_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """results.json's lines for a student: no notebook, several, none readable, the machinery
    failed or did not finish, and each test's output (all passed, not graded, the hints)."""
    from grader.integrations.gradescope.run import (
        DID_NOT_FINISH,
        GRADER_FAILED,
        Config,
        document,
        failure,
        find_notebook,
        zeroed,
    )

    monkeypatch.setenv("COURSE_LANG", xx)
    cfg, lesson = Config(lesson="01_attention_by_hand"), "01_attention_by_hand"
    problems = [find_notebook(tmp_path / "absent")[1]]
    (tmp_path / "sub").mkdir()
    problems.append(find_notebook(tmp_path / "sub")[1])
    (tmp_path / "sub" / "answers.py").write_text("print(1)\n")
    problems.append(find_notebook(tmp_path / "sub")[1])
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / "sub" / name).write_text("{}")
    problems.append(find_notebook(tmp_path / "sub")[1])
    values = ["answers.py", "a.ipynb", "b.ipynb", lesson, ".ipynb"]
    for problem in problems:
        assert problem is not None
        doc = document(cfg, zeroed(lesson, problem), [problem], status="missing", seconds=1.0,
                       extra={}, lang=xx)
        _said_without_english([problem], doc["output"], values)
        for test in doc["tests"]:
            _said_without_english([problem], test["output"], values)
    for sentence in (GRADER_FAILED, DID_NOT_FINISH):
        doc = failure(cfg, 0.0, sentence, "boom")
        _said_without_english([sentence], doc["output"])
    passed = document(cfg, [ExerciseResult("softmax", 4.0, 4.0)], [], status="ok", seconds=1.0,
                      extra={}, lang=xx)
    _said_without_english([], passed["tests"][0]["output"])


def test_a_template_shows_a_message_in_the_pages_language_and_refuses_one_it_cannot(xx: str) -> None:
    """``{{ message }}`` without ``t(...)``: the page's language (English, its ``str``, before),
    and a TypeError in a template that has no ``t``."""
    from grader.common import templating

    page = templating._environment().from_string("<p>{{ note }}</p>")
    note = i18n.msg("{graded} graded, {left} left", graded=3, left=1)
    assert page.render(note=note, t=i18n.words(xx)) == "<p>" + i18n.render(note, xx) + "</p>"
    assert page.render(note="plain words", t=i18n.words(xx)) == "<p>plain words</p>"
    with pytest.raises(TypeError, match="no `t`"):
        page.render(note=note)


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``python -m grader ARGV`` in this process: its exit status and what it printed."""
    from grader import cli

    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out + err


def _cli_said_without_english(said: str, values: Iterable[str] = ()) -> None:
    """What a command printed, less its program name: no English but the values."""
    assert said.strip() and not _english(said.replace("grader ", " "), values), (_english(said, values), said)


def test_cli_errors_and_notes_say_everything_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """UserError texts of ``grade``/``gradebook``, ``helper``'s lines, the interruption note."""
    from grader import cli, helper
    from grader.classgrade.classroom import Interrupted
    from grader.sandbox.probe import PROTECTIONS

    monkeypatch.setenv("COURSE_LANG", xx)
    (tmp_path / "class" / "s1" / "02_split_heads").mkdir(parents=True)
    for argv in (["grade", str(tmp_path / "absent"), "--lesson", "01", "--out", str(tmp_path / "o")],
                 ["grade", str(tmp_path / "class"), "--lesson", "01", "--out", str(tmp_path / "o")],
                 ["grade", str(tmp_path / "class" / "s1"), "--lesson", "02", "--out", str(tmp_path / "o")],
                 ["grade", str(tmp_path / "class"), "--lesson", "02", "--out", str(tmp_path / "o"),
                  "--require", "bogus,memory-cap", "--deadlines", "none"],
                 ["gradebook"]):
        code, said = _run_cli(argv, capsys)
        assert code == 2, said
        _cli_said_without_english(said, [str(tmp_path), "s1", "01_attention_by_hand", "02_split_heads",
                                         "bogus", *PROTECTIONS, "--lesson", "--roster", "--require"])
    monkeypatch.setattr(helper, "start", lambda **_: False)
    monkeypatch.setattr(helper, "request", lambda action: None if action == "status" else {"ok": True})
    for action in ("start", "status", "stop"):
        _cli_said_without_english(_run_cli(["helper", action], capsys)[1], ["COURSE_CHECK_HELPER", "CI"])
    for done in (None, SimpleNamespace(graded=3, left=1)):
        cli._interrupted(Interrupted(2, done))  # type: ignore[arg-type]
        _cli_said_without_english(capsys.readouterr().err)


def test_deadlines_says_its_summary_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from support import ROOT

    monkeypatch.setenv("COURSE_LANG", xx)
    example = ROOT / "docs" / "examples" / "deadlines.toml"
    code, said = _run_cli(["deadlines", str(example), "--no-gradebook"], capsys)
    assert code == 0
    _cli_said_without_english(said, [str(example)])


def test_selftest_says_its_table_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from grader.classgrade import selftest

    def check_lesson(lesson: catalogue.Lesson, isolation: str, require: tuple[str, ...]) -> tuple[
            selftest.LessonSelftest, list[str], dict[str, str]]:
        problems = [i18n.msg("the untouched student notebook scored {score} [{status}]", score="2", status="ok")]
        return selftest.LessonSelftest(lesson.id, 4.0, 2.0, 4.0, 1.5, problems), ["bwrap"], {"memory-cap": "x"}

    monkeypatch.setenv("COURSE_LANG", xx)
    monkeypatch.setattr(selftest, "check_lesson", check_lesson)
    code, said = _run_cli(["selftest", "--lessons", "01"], capsys)
    assert code == 1
    _cli_said_without_english(said, ["01_attention_by_hand", "auto", "memory-cap"])


def test_gradebook_and_lms_say_their_summaries_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Both sides of a roster that does not match, Canvas's test student and an assignment the
    roster lacks; the mismatch note on stderr."""
    from support import ROOT

    from grader.results.folder import CSV_HEADER

    monkeypatch.setenv("COURSE_LANG", xx)
    folder = tmp_path / "l01"
    folder.mkdir()
    (folder / "grades.csv").write_text(
        ",".join(CSV_HEADER + ["ex1"]) + "\nalice,01_attention_by_hand,10,10,ok,x,10\n"
        "zed,01_attention_by_hand,0,10,missing,x,0\n", encoding="utf-8")
    roster = ROOT / "tests" / "fixtures" / "lms" / "canvas_gradebook_export.csv"
    values = [str(tmp_path), "alice", "zed", "01_attention_by_hand", "canvas", "Canvas", "Student", "ID",
              "SIS Login ID", "--key", "--assignment", "missing"]
    for argv in (["gradebook", str(folder), "--roster", str(roster), "--key", "SIS Login ID",
                  "--out", str(tmp_path / "book.csv")],
                 ["lms", str(folder), "--roster", str(roster), "--to", "canvas", "--key", "SIS Login ID"]):
        code, said = _run_cli(argv, capsys)
        assert code == 1, said
        names = re.findall(r"Lesson \d\d: [a-z ]+ \(\d+\)|[A-Z][a-z]+,? [A-Z][a-z]+", said)  # the roster's
        _cli_said_without_english(said, values + names)


def test_release_gradescope_and_return_feedback_say_their_summaries_in_the_new_language(
        xx: str, tmp_path: Path) -> None:
    from grader.authoring.release import BundlePlan
    from grader.authoring.release import summary as release_summary
    from grader.integrations.gradescope.package import Package
    from grader.integrations.gradescope.package import summary as package_summary
    from grader.outputs.feedback import Returned
    from grader.outputs.feedback import summary as feedback_summary

    lessons = [catalogue.get("04"), catalogue.get("03")]
    for lang in ("zh", "both"):
        plan = BundlePlan(lessons, datasets=[], references=lessons[1:], uses_own={lessons[0].id: lessons[1:]},
                          not_bundled=lessons[1:], lang=lang)
        said = release_summary(tmp_path, plan, lang=xx)
        _cli_said_without_english(said, [str(tmp_path), *(x.id for x in lessons), lessons[1].reference_file.name, lang,
                                         "README.md", "README.zh.md", "README", "--with-reference"])
    pkg = Package(tmp_path / "autograder.zip", "01_attention_by_hand", ["softmax", "scores"], 9, 1000)
    _cli_said_without_english(package_summary(pkg, xx), [str(tmp_path / "autograder.zip"), "01_attention_by_hand",
                                                          "softmax", "scores", "Gradescope", "Configure Autograder",
                                                          "Zip file upload", "assignment"])
    done = Returned(copied=["s1/01_attention_by_hand"],
                    skipped=[i18n.msg("{student}/{lesson}: no submission_secret.txt (not submitted through the "
                                      "exchange)", student="s2", lesson="01_attention_by_hand")])
    where = i18n.msg("{folder}/feedback/ (now: nbgrader release_feedback LESSON)", folder=str(tmp_path))
    _cli_said_without_english(feedback_summary(done, where, xx),
                              [str(tmp_path), "s2", "01_attention_by_hand", "submission_secret.txt",
                               "nbgrader release_feedback LESSON"])


def test_lms_and_gradebook_refuse_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``lms``'s and ``gradebook``'s errors: an empty or unknown roster, too many assignment
    names, a grades.csv of no students or of two lessons, unreadable weights, a lesson twice."""
    from grader.results.folder import CSV_HEADER

    monkeypatch.setenv("COURSE_LANG", xx)
    header = ",".join(CSV_HEADER + ["ex1"]) + "\n"
    rows = {"one": "alice,01_attention_by_hand,1,1,ok,x,1\n",
            "two": "alice,01_attention_by_hand,1,1,ok,x,1\nbob,02_split_heads,1,1,ok,x,1\n", "none": ""}
    for name, body in rows.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "grades.csv").write_text(header + body, encoding="utf-8")
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    (tmp_path / "other.csv").write_text("Who,Where\nalice,here\n", encoding="utf-8")
    one, empty, other = (str(tmp_path / x) for x in ("one", "empty.csv", "other.csv"))
    for argv in (["lms", one, "--roster", empty, "--to", "canvas"],
                 ["lms", one, "--roster", other, "--to", "canvas"],
                 ["lms", one, "--roster", other, "--to", "canvas", "--assignment", "a", "--assignment", "b"],
                 ["lms", str(tmp_path / "two"), "--roster", other, "--to", "canvas", "--key", "Who"],
                 ["lms", str(tmp_path / "none"), "--roster", other, "--to", "canvas", "--key", "Who"],
                 ["gradebook", one, "--roster", other, "--key", "Who", "--weights", "01=x"],
                 ["gradebook", one, one, "--roster", other, "--key", "Who"]):
        code, said = _run_cli(argv, capsys)
        assert code == 2, said
        _cli_said_without_english(said, [str(tmp_path), "Who, Where", "01_attention_by_hand, 02_split_heads",
                                         "--key", "--assignment", "Canvas's", "Moodle's", "--weights"])


def test_a_graded_folder_release_and_gradescope_refuse_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The errors of a graded folder this grader cannot read (a newer or a bad schema, no
    grades.csv) through ``report`` and ``lms``, ``release``'s refusals of its folder (in the
    instructor's language, not its ``--lang`` edition's), an unknown ``$GRADER_LOG_LEVEL`` and
    ``gradescope``'s torch pin."""
    from grader import cli
    from grader.integrations.gradescope.package import PackageError, _torch_pin

    monkeypatch.setenv("COURSE_LANG", xx)
    for name, schema in (("newer", 999), ("bad", "x"), ("nogrades", 1)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps({"schema": schema}), encoding="utf-8")
    (tmp_path / "roster.csv").write_text("student_id\nalice\n", encoding="utf-8")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a.txt").write_text("x", encoding="utf-8")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    lms = ["--roster", str(tmp_path / "roster.csv"), "--to", "canvas"]
    for argv in (["report", str(tmp_path / "newer")], ["report", str(tmp_path / "bad")],
                 ["lms", str(tmp_path / "newer"), *lms], ["lms", str(tmp_path / "nogrades"), *lms],
                 ["release", str(tmp_path / "full"), "--lang", "en"],
                 ["release", str(tmp_path / "repo"), "--force"]):
        code, said = _run_cli(argv, capsys)
        assert code == 2, said
        _cli_said_without_english(said, [str(tmp_path / "nogrades" / "grades.csv"), str(tmp_path), "'x'",
                                         "No such file or directory", "`grade`", "`grade --out`", "--force"])
    monkeypatch.setenv("GRADER_LOG_LEVEL", "loud")
    code, said = _run_cli(["report", str(tmp_path / "newer")], capsys)
    assert code == 2, said
    _cli_said_without_english(said, ["GRADER_LOG_LEVEL", "debug, info, warning, error, critical", "'loud'"])
    with pytest.raises(PackageError, match="must pin torch exactly once") as refused:
        _torch_pin([])
    _cli_said_without_english(cli.said(refused.value.args[0]), ["pyproject.toml", "torch==X.Y.Z"])


BROKEN_NOTEBOOKS = {  # what `grader check` cannot read, and why (each a reason of its own)
    "empty": b"", "binary": b"\xff\xfe\x00", "json": b"{not json", "list": b"[1, 2]",
    "old": b'{"nbformat": 3, "cells": []}', "new": b'{"nbformat": 5, "cells": []}',
    "cellless": b'{"nbformat": 4}', "cell": b'{"nbformat": 4, "cells": [3]}',
    "source": b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}',
    "metadata": b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": "", "metadata": 3}]}',
    "deep": b"[" * 100_000,
}


def _no_worker() -> NoReturn:
    raise AssertionError("no worker for a notebook that cannot be read")


def test_a_notebook_check_cannot_read_is_refused_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``grader check``'s NotebookError (no such file, a folder, each broken notebook) in the
    student's language; ``grade``'s report of such a notebook too (its reason a message, not the
    English cut after the notebook's name)."""
    from grader.check.notebook import NotebookError
    from grader.classgrade import classroom

    monkeypatch.setenv("COURSE_LANG", xx)
    paths = [tmp_path / "absent.ipynb", tmp_path]
    for name, data in BROKEN_NOTEBOOKS.items():
        (tmp_path / f"{name}.ipynb").write_bytes(data)
        paths.append(tmp_path / f"{name}.ipynb")
    said = set()
    for path in paths:
        code, text = _run_cli(["check", str(path), "--lesson", "01", "--no-helper"], capsys)
        assert code == 2, text
        said.add(text)
        _cli_said_without_english(text, [str(path), "Expecting property name enclosed in double quotes",
                                         "JupyterLab", "Jupyter"])

        if path.is_file():
            report = classroom.grade_notebook(path, path.name, classroom.Options(lesson="01_attention_by_hand",
                                                                                   out=tmp_path / "out"), _no_worker)
            assert report.reason and i18n.render(report.reason, xx).startswith("⟦"), report.reason
            _cli_said_without_english(i18n.render(report.reason, xx),  # the reason's own words too
                                      ["Expecting property name enclosed in double quotes", "JupyterLab", "Jupyter"])
    assert len(said) == len(paths)  # a reason each
    with pytest.raises(NotebookError) as refused:
        from grader.check.notebook import read_notebook
        read_notebook(tmp_path / "old.ipynb", "old.ipynb")
    assert str(refused.value).startswith("old.ipynb: nbformat 3 is too old")  # English as it was


def test_a_lesson_selection_coursekit_refuses_is_said_in_the_new_language(
        xx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """coursekit's SelectionError and UnknownLesson (coursekit imports no grader: they carry
    their sentence's template and fields, which the catalogue translates) through ``selftest
    --lessons``, ``release --lessons`` and a look-up."""
    from coursekit.catalogue import Catalogue, SelectionError
    from coursekit.errors import UnknownLesson

    monkeypatch.setenv("COURSE_LANG", xx)
    have = ", ".join(lesson.number for lesson in catalogue.COURSE)
    for spec in ("04-02", "01-13", "13", "abc"):
        for argv in (["selftest", "--lessons", spec], ["release", str(tmp_path / "out"), "--lessons", spec]):
            code, said = _run_cli(argv, capsys)
            assert code == 2, said
            _cli_said_without_english(said, [spec, repr(spec), have, "--lessons", "01-04", "01,03,05-07"])
    with pytest.raises(UnknownLesson) as unknown:
        catalogue.get("99")
    with pytest.raises(SelectionError) as none:
        Catalogue([]).select("all")
    for refused in (unknown.value, none.value):
        said = i18n.render(i18n.said_by(refused), xx)
        _said_without_english([], said, ["'99'", ", ".join(catalogue.COURSE.ids())])
    assert str(unknown.value).startswith("no lesson '99' (lessons: 01_attention_by_hand,")  # English as it was


def test_lms_refusals_of_a_roster_or_grades_are_said_in_the_new_language(xx: str, tmp_path: Path) -> None:
    """The rest of ``grader.outputs.lms``'s errors: no such key column (Canvas's email or any),
    a key column that is not unique, two graded students or two rows that are one id, a column
    that matches nobody (by email or not)."""
    from grader.outputs import lms
    from grader.results.folder import CSV_HEADER

    roster = lms.Roster("canvas", ["Student", "ID", "SIS Login ID"],
                        [{"Student": "Ann Lee", "ID": "1", "SIS Login ID": "ann"},
                         {"Student": "Bo Yu", "ID": "1", "SIS Login ID": "bo@x.org"}])
    (tmp_path / "l01").mkdir()
    (tmp_path / "l01" / "grades.csv").write_text(
        ",".join(CSV_HEADER + ["ex1"]) + "\ncaf\u00e9,01_attention_by_hand,1,1,ok,x,1\n"
        "cafe\u0301,01_attention_by_hand,1,1,ok,x,1\n", encoding="utf-8")  # one id, two Unicode forms
    refusals = [lambda: lms.key_column(roster, "email"), lambda: lms.key_column(roster, "Who"),
                lambda: lms.match(roster, "ID", ["ann"]), lambda: lms.match(roster, "SIS Login ID", ["x", "X"]),
                lambda: lms.read_lesson(tmp_path / "l01"),
                lambda: lms.pair(roster, "Student", ["ann"]), lambda: lms.pair(roster, "Student", ["ann"], True)]
    said = set()
    for refusal in refusals:
        with pytest.raises(lms.LmsError) as refused:
            refusal()
        text = i18n.render(i18n.said_by(refused.value), xx)
        said.add(text)
        _said_without_english([i18n.said_by(refused.value)], text,
                              [str(tmp_path / "l01" / "grades.csv"), "Canvas's", "SIS Login ID", "Student, ID",
                               "Ann Lee", "Bo Yu", "--key", "--local-part"])
    assert len(said) == len(refusals)


def test_the_check_helper_says_its_status_and_refusals_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``grader helper status``: each line of the helper's reply (its keys and states); a helper
    that cannot be asked (the system's words kept, the helper's private folder refused)."""
    from grader import helper
    from grader.helper import client, private

    monkeypatch.setenv("COURSE_LANG", xx)
    reply = {"ok": True, "pid": 4242, "socket": "/run/user/1/attention-course/helper.sock", "ready": True,
             "checks": 3, "active": 0, "idle_s": 12.5, "stops_after_idle_s": 1800.0, "uptime_s": 60.2,
             "protections": ["bwrap", "memory-cap"], "log": "/run/user/1/attention-course/helper.log"}
    asking = helper.request
    monkeypatch.setattr(helper, "request", lambda action: reply)
    code, said = _run_cli(["helper", "status"], capsys)
    assert code == 0 and len(said.splitlines()) == len(reply) - 1, said
    _cli_said_without_english(said, [reply["socket"], reply["log"], "bwrap, memory-cap"])
    monkeypatch.setattr(helper, "request", asking)

    def refused() -> None:
        raise OSError("Connection refused")
    monkeypatch.setattr(client, "connect", lambda path: refused())
    code, said = _run_cli(["helper", "status"], capsys)
    assert code == 2 and "Connection refused" in said, said
    _cli_said_without_english(said, ["Connection refused"])
    monkeypatch.setattr(private, "_candidates", lambda: iter(["/" + "x" * 100]))
    code, said = _run_cli(["helper", "stop"], capsys)
    assert code == 2, said
    _cli_said_without_english(said)


def test_checks_table_lines_up_with_a_longer_word_for_total(xx: str) -> None:
    """``grader check``'s table: the points line up under a ``total`` wider than every
    exercise's name (⟦ｔｏｔａｌ⟧: 12 columns)."""
    from zh_tables import Table, cells_of, misaligned

    from grader.outputs.render import to_text

    report = Report("nb.ipynb", "01_attention_by_hand", [ExerciseResult("softmax", 4.0, 4.0),
                                                         ExerciseResult("attention", 1.5, 4.0)])
    lines = to_text(i18n.localize(report, xx)).splitlines()[2:5]
    cells = [cells_of(line)[-1:] for line in lines]  # the points
    assert not misaligned(Table(None, cells)), "\n".join(lines)


def test_nbgraders_autograde_refuses_an_assignment_of_no_lesson_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error nbgrader shows when the sandboxed autograde may not fall back to a kernel."""
    pytest.importorskip("nbgrader")
    from nbformat.v4 import new_notebook

    from grader.integrations.nbgrader.sandbox import SandboxedAutograde

    monkeypatch.setenv("COURSE_LANG", xx)
    step = SandboxedAutograde(fallback_to_kernel=False)
    with pytest.raises(ValueError) as refused:
        step.preprocess(new_notebook(), {"nbgrader": {"assignment": "ps1", "notebook": "ps1"}})
    _said_without_english([], str(refused.value), ["'ps1'", ", ".join(catalogue.COURSE.ids())])


def test_a_sandbox_that_lacks_what_is_required_is_refused_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``grade --isolation strict`` or ``--require`` on a machine without the protection: the
    refusal's sentence and each missing protection's line (the probe's reasons are the
    system's words)."""
    from grader.sandbox.probe import SandboxUnavailable, plan

    monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", "all")
    for isolation, require in (("strict", ()), ("auto", ("memory-cap",))):
        with pytest.raises(SandboxUnavailable) as refused:
            plan(isolation, require)
        said = i18n.said_by(refused.value)
        assert str(said).startswith(("strict isolation is not", "a required protection is not"))  # English as it was
        for line in i18n.render(said, xx).splitlines():
            _said_without_english([said], line, ["GRADER_SANDBOX_WITHOUT"])


SETTINGS_REFUSED = [  # (variable, value, what reads it)
    ("COURSE_THREADS", "x", "threads"),
    ("COURSE_CALL_TIMEOUT", "x", "call_timeout"),
    ("COURSE_CALL_TIMEOUT", "-1", "call_timeout"),
    ("COURSE_EDITION", "x", "edition"),
    ("COURSE_AUTOGRADE", "x", "autograde"),
    ("COURSE_CHECK_HELPER", "x", "check_helper_minutes"),
    ("GRADER_LOG_LEVEL", "x", "log_level"),
]


@pytest.mark.parametrize(("variable", "value", "reader"), SETTINGS_REFUSED)
def test_a_setting_coursekit_refuses_is_said_in_the_new_language(
        xx: str, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, reader: str) -> None:
    """coursekit.settings' refusals of a variable's value (a SettingError: still a ValueError,
    its English ``str`` as before) carry their sentence, which the catalogue translates."""
    from coursekit import settings
    from coursekit.errors import SettingError

    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingError) as refused:
        getattr(settings, reader)()
    assert isinstance(refused.value, ValueError) and str(refused.value).startswith(variable)
    said = i18n.render(i18n.said_by(refused.value), xx)
    _said_without_english([], said, [variable, repr(value), ", ".join(settings.LOG_LEVELS),
                                     ", ".join(settings.EDITION_CHOICES), ", ".join(settings.AUTOGRADE_CHOICES)])


def test_a_preset_a_lesson_lacks_is_said_in_the_new_language(xx: str) -> None:
    """load_preset's refusal of a preset the lesson has not (a SettingError too)."""
    from coursekit import settings
    from coursekit.errors import SettingError

    with pytest.raises(SettingError) as unknown:
        settings.load_preset({"cpu": object()}, "fast")
    _said_without_english([], i18n.render(i18n.said_by(unknown.value), xx), ["'fast'", "cpu"])


def test_a_wrong_check_helper_setting_is_one_line_in_chinese(tmp_path: Path) -> None:
    """``python -m grader check`` with ``COURSE_CHECK_HELPER=x``: the warm check's client leaves
    it to the full command line, which says it in one line (exit 2), not a traceback."""
    import os
    import subprocess
    import sys

    from support import ROOT

    env = {k: v for k, v in os.environ.items() if k != "CI"} | {
        "COURSE_CHECK_HELPER": "x", "COURSE_LANG": "zh", "XDG_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "grader", "check", "missing.ipynb"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == ["grader: COURSE_CHECK_HELPER 必须是分钟数或 'off'，而不是 'x'"]
