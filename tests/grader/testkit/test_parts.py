"""A mistake is charged once: while an exercise is graded, the exercises it builds on
(its test file's BUILDS_ON) are the course's versions (grader.testkit.parts), in process and in
the sandbox, and the student's own come back afterwards."""

from __future__ import annotations

import ast
import json

import pytest
from planted import modules
from support import solution_path

from grader.check.engine import grade_in_process
from grader.testkit import parts
from grader.testkit.lessons import hidden_test_file
from grader.testkit.submission import InProcessSubmission

LESSON = "07_positional_encoding"


def _solution(lesson: str) -> dict:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"])
    return nb


def _bug(lesson: str, mistake: str) -> dict:
    module = next(m for m in modules() if m.LESSON == lesson)
    return next(v for v in module.BUGS if v.mistake == mistake).apply(_solution(lesson))


def _defined(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_only_what_is_asked_for_and_what_it_uses_crosses_over() -> None:
    assert _defined(parts.course_source(LESSON, ("sinusoidal_positional_encoding",))) == {
        "sinusoidal_positional_encoding"}
    layers = _defined(parts.course_source("08_transformer", ("EncoderLayer",)))
    assert layers == {"EncoderLayer", "PositionwiseFeedForward"}  # the layer builds an FFN
    with pytest.raises(KeyError):
        parts.course_source(LESSON, ("no_such_exercise",))


def test_every_declared_part_exists_in_its_lesson() -> None:
    for lesson in ("01_attention_by_hand", "07_positional_encoding", "08_transformer", "09_training"):
        names = parts.builds_on(lesson)
        assert names, f"{hidden_test_file(lesson).name} declares no BUILDS_ON"
        assert set(names) <= _defined(parts.course_source(lesson, names))


def test_prepare_builds_every_source_a_lessons_tests_send() -> None:
    """What the check helper's trusted zygote runs, so that no check parses the reference
    module again: afterwards, every BUILDS_ON entry of the lesson is a cache hit."""
    import importlib

    tests = importlib.import_module(f"grader.hidden.{hidden_test_file('08_transformer').stem}")
    parts.prepare(tests)
    before = parts.course_source.cache_info()
    for names in tests.BUILDS_ON.values():
        parts.course_source("08", tuple(names))
    after = parts.course_source.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + len(tests.BUILDS_ON)


def test_the_students_own_versions_come_back() -> None:
    sub = InProcessSubmission()
    sub.load([(0, "def helper():\n    return 'mine'\n")])
    source = "def helper():\n    return 'course'\n\ndef extra():\n    return 1\n"
    with sub.course_versions(source, ("helper", "extra")):
        assert sub.call("helper") == "course" and sub.call("extra") == 1
    assert sub.call("helper") == "mine"
    assert not sub.has("extra")  # a name the student never defined is gone again


def test_a_wrong_table_costs_the_table_only() -> None:
    report = {e.name: e for e in grade_in_process(_bug(LESSON, "pe_concatenated"), LESSON, seed=7).exercises}
    assert report["sinusoidal_positional_encoding"].points < report["sinusoidal_positional_encoding"].max_points
    assert report["PositionalEncoding"].points == report["PositionalEncoding"].max_points
    assert not report["PositionalEncoding"].hints


def test_a_missing_table_costs_the_table_only() -> None:
    nb = _solution(LESSON)
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "sinusoidal_positional_encoding":
            cell["source"] = cell["source"].replace("def sinusoidal_positional_encoding(",
                                                             "def my_table(")
    report = {e.name: e for e in grade_in_process(nb, LESSON, seed=7).exercises}
    assert report["sinusoidal_positional_encoding"].points == 0
    assert report["PositionalEncoding"].points == report["PositionalEncoding"].max_points


def test_a_loss_mistake_costs_the_loss_only_in_the_sandbox() -> None:
    from grader.check.engine import grade_with_worker
    from grader.classgrade.classroom import public_files
    from grader.sandbox import Limits, SandboxPool, default_worker_files

    lesson = "09_training"
    files = {**default_worker_files(), **public_files(lesson)}
    assert "coursekit/reference/lesson09.py" not in files  # the course's loss is sent, not shipped
    with SandboxPool(jobs=1, limits=Limits(wall_s=120, memory_bytes=3 << 30), worker_files=files) as pool:
        report = grade_with_worker(_bug(lesson, "nll_pads_counted"), lesson, pool.start(), seed=7)
    scores = {e.name: (e.points, e.max_points) for e in report.exercises}
    assert scores["label_smoothed_nll"][0] < scores["label_smoothed_nll"][1]
    assert scores["train_step"][0] == scores["train_step"][1]
