"""tests/ is laid out like the code (issue 53, item 8): every test file sits in a folder named
after what it tests, ``tests/grader/<package>/`` (a package or module of ``grader/``),
``tests/coursekit/``, ``tests/lessons/``, ``tests/docs/``, ``tests/benchmarks/``, or
``tests/project/`` for the repository itself; and test files' names are unique (pytest imports
them by name)."""

from __future__ import annotations

from pathlib import Path

from support import ROOT

#: tests/ folders that name no folder of the repository: the repository as a whole.
AREAS = {"project"}
#: Folders of tests/ that hold no tests of their own (data, planted bugs).
NOT_TESTS = {"fixtures", "planted"}


def misplaced(tests: Path, root: Path) -> list[str]:
    """A line per test file outside a folder that mirrors the code, saying where it goes."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests)
        if folder.parts and folder.parts[0] in NOT_TESTS:
            continue
        mirrors = (folder.parts and (folder.parts[0] in AREAS and len(folder.parts) == 1
                                     or (root / folder).is_dir() or (root / folder).with_suffix(".py").is_file()))
        if not mirrors:
            found.append(f"tests/{path.relative_to(tests).as_posix()}: put it in the folder of what it tests, "
                         "tests/grader/<package>/, tests/coursekit/, tests/lessons/, tests/docs/, "
                         "tests/benchmarks/ or tests/project/ (CONTRIBUTING.md, Testing)")
    return found


def duplicate_names(tests: Path) -> list[str]:
    names: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        if path.relative_to(tests).parts[0] not in NOT_TESTS:
            names.setdefault(path.name, []).append(path.relative_to(tests).as_posix())
    return sorted(name for name, paths in names.items() if len(paths) > 1)


def test_every_test_file_sits_in_the_folder_of_what_it_tests() -> None:
    assert misplaced(ROOT / "tests", ROOT) == []
    assert duplicate_names(ROOT / "tests") == []


def test_a_test_file_out_of_place_is_named_with_where_it_goes(tmp_path: Path) -> None:
    """The check above can fail: a file at the top of tests/, or in a folder that mirrors
    nothing, is named; one in a package's folder, a module's or an area is not."""
    tests = tmp_path / "tests"
    (tmp_path / "grader" / "check").mkdir(parents=True)
    (tmp_path / "grader" / "record.py").write_text("")
    for rel in ("test_new.py", "grader/check/test_ok.py", "grader/record/test_ok2.py",
                "project/test_ok3.py", "graders/test_typo.py", "planted/test_data.py",
                "grader/check/deeper/test_twice.py", "project/test_twice.py"):
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text("")
    found = misplaced(tests, tmp_path)
    assert [line.split(":")[0] for line in found] == [
        "tests/grader/check/deeper/test_twice.py", "tests/graders/test_typo.py", "tests/test_new.py"]
    assert "put it in the folder of what it tests, tests/grader/<package>/" in found[-1]
    assert duplicate_names(tests) == ["test_twice.py"]
