"""grader.results: one sentence per status, the same in the CSV, the JSON record and the
feedback page; every status documented in the README."""

from __future__ import annotations

import csv
import io
import json
import re

from support import ROOT

from grader.common.hint import Hint
from grader.outputs.render import feedback_html, to_text
from grader.results import (
    STOPPED,
    ExerciseResult,
    Report,
    Status,
    not_graded,
)
from grader.results.folder import SPEC_KEYS, grades_row, grades_table, result_object

EXERCISES = {"dot_scores": 2.0, "softmax": 4.0}


def _report(status: Status = Status.OK) -> Report:
    return Report("alice/01/01.ipynb", "01_attention_by_hand",
                  [ExerciseResult("dot_scores", 2.0, 2.0),
                   ExerciseResult("softmax", 0.0, 4.0, [Hint("rows should sum to 1 <b>"), Hint("rows should sum to 1 <b>")])],
                  status=status)


def test_every_status_has_its_sentence() -> None:
    assert _report().message == "Graded: 2 of 6 points."
    for status, sentence in STOPPED.items():
        assert _report(status).message == str(sentence)
    missing = not_graded("x", "01_attention_by_hand", EXERCISES, Status.MISSING, "No submission: x.")
    assert missing.message == "No submission: x." and missing.score == 0 and missing.max_score == 6
    assert all([h.text for h in e.hints] == ["No submission: x."] for e in missing.exercises)


def test_a_record_read_back_gives_the_same_row_and_sentence() -> None:
    for report in (_report(), _report(Status.TIMEOUT),
                   not_graded("x", "01_attention_by_hand", EXERCISES, Status.UNREADABLE, "Broken JSON.")):
        record = json.loads(json.dumps(result_object(report)))
        assert list(record)[:len(SPEC_KEYS)] == list(SPEC_KEYS)  # the spec's, then its own
        assert set(record) == {*SPEC_KEYS, "notes", "seed", "schema"}
        again = Report.from_dict(record)
        assert again.message == report.message
        assert grades_row("alice", again, list(EXERCISES)) == grades_row("alice", report, list(EXERCISES))


def test_csv_has_the_spec_header_and_one_line_per_student() -> None:
    report = not_graded("x", "01_attention_by_hand", EXERCISES, Status.UNREADABLE, "line one\nline two")
    text = grades_table([grades_row("alice", report, list(EXERCISES))], list(EXERCISES))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["student_id", "lesson", "score", "max_score", "status", "message", *EXERCISES]
    assert rows[1][4:6] == ["unreadable", "line one line two"] and len(text.splitlines()) == 2


def test_text_and_feedback_show_each_hint_once_and_escape_html() -> None:
    report = _report(Status.MEMORY)
    text = to_text(report)
    assert text.count("hint: rows should sum to 1") == 1 and text.endswith(str(STOPPED[Status.MEMORY]))
    assert "Graded:" not in to_text(_report())  # an ok report needs no sentence in the table
    page = feedback_html(report, "<alice>")
    assert page.count("rows should sum to 1") == 1
    assert "<b>" not in page.replace("<b>2 / 6</b>", "").replace("<b>&lt;alice&gt;</b>", "")
    assert "&lt;alice&gt;" in page and str(STOPPED[Status.MEMORY]) in page


def test_the_readme_documents_every_status() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", readme, re.M))
    assert documented >= {s.value for s in Status}, {s.value for s in Status} - documented


def test_one_jinja_environment_renders_every_template() -> None:
    """grader.common.templating is the only place a Jinja environment is made; it escapes HTML
    and XML templates and leaves Markdown, TOML and shell scripts as written."""
    from grader.common.templating import escapes

    makers = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "grader").rglob("*.py"))
              if re.search(r"\bjinja2\.Environment\(|from jinja2 import", path.read_text(encoding="utf-8"))]
    assert makers == ["grader/common/templating.py"]
    assert escapes("feedback.html.j2") and escapes("class_report.html.j2") and escapes("x.xml.j2")
    assert not any(escapes(name) for name in ("release-README.md.j2", "setup.sh.j2", "run_autograder.j2",
                                               "release-pyproject.toml.j2", None))
