"""coursekit.catalogue: lesson lookup, selection, editions, nbgrader's cell roles, and what
a notebook's code says, read with ast."""

from __future__ import annotations

import pytest

from coursekit import catalogue
from coursekit.catalogue import COURSE, Lesson, SelectionError


def test_lookup_by_id_or_number() -> None:
    lesson = catalogue.get("04_multi_head_attention")
    assert catalogue.get("04") is lesson and catalogue.get("4") is lesson
    assert lesson.number == "04" and lesson.reference_module == "coursekit.reference.lesson04"
    assert lesson.solution().relative_to(catalogue.ROOT).as_posix() == \
        "solutions/04_multi_head_attention/04_multi_head_attention.ipynb"
    assert lesson.student().relative_to(catalogue.ROOT).as_posix() == \
        "lessons/04_multi_head_attention/04_multi_head_attention.ipynb"
    with pytest.raises(KeyError, match="no lesson '13'"):
        catalogue.get("13")


@pytest.mark.parametrize("spec, numbers", [
    (None, [f"{n:02d}" for n in range(1, 13)]), ("all", [f"{n:02d}" for n in range(1, 13)]),
    ("01-04", ["01", "02", "03", "04"]), ("01,03,05-07", ["01", "03", "05", "06", "07"]),
    ("7, 3", ["03", "07"]), ("03_scaled_dot_product_attention,3", ["03"]),
])
def test_selection(spec, numbers) -> None:
    assert [lesson.number for lesson in catalogue.select(spec)] == numbers


@pytest.mark.parametrize("spec, words", [("99", "no lesson 99"), ("03-01", "empty range"),
                                         ("08-14", "no lesson 13, 14"), ("x", "cannot read")])
def test_bad_selections_say_why_in_one_line(spec, words) -> None:
    with pytest.raises(SelectionError, match=words) as refused:
        catalogue.select(spec)
    assert "\n" not in str(refused.value)


def test_spec_of_numbers() -> None:
    assert catalogue.spec_of(["08", "03", "04", "05"]) == "03-05,08"


def test_editions_sit_beside_the_english_notebook(tmp_path) -> None:
    lesson = Lesson("04_multi_head_attention", "Multi-head attention", editions=("en", "zh"), root=tmp_path)
    assert lesson.notebooks("student") == {
        "en": tmp_path / "lessons/04_multi_head_attention/04_multi_head_attention.ipynb",
        "zh": tmp_path / "lessons/04_multi_head_attention/04_multi_head_attention.zh.ipynb"}
    course = catalogue.Catalogue([lesson], tmp_path)
    assert course.lesson_of("x/04_multi_head_attention.zh.ipynb") is course.get("04")
    assert course.edition_of("x/04_multi_head_attention.zh.ipynb") == "zh"
    assert course.edition_of("04_multi_head_attention.ipynb") == "en"
    with pytest.raises(KeyError, match="no 'zh' edition"):
        Lesson("04_multi_head_attention", "Multi-head attention", root=tmp_path).student("zh")
    with pytest.raises(ValueError, match="editions"):
        Lesson("04_x", "x", editions=("fr",))


def test_the_lesson_of_a_notebook_from_its_name_or_folder() -> None:
    assert COURSE.lesson_of("submitted/alice/02_split_heads/02_split_heads.ipynb").id == "02_split_heads"
    assert COURSE.lesson_of("02_split_heads/mine.ipynb").id == "02_split_heads"
    assert COURSE.lesson_of("elsewhere/mine.ipynb") is None


def _cell(cell_type="code", **nbgrader) -> dict:
    return {"cell_type": cell_type, "source": ["a = 1\n", "b = 2"],
            "metadata": {"nbgrader": nbgrader} if nbgrader else {}}


def test_cell_roles_follow_nbgrader() -> None:
    answer = _cell(solution=True, grade=False, locked=False)
    tests = _cell(grade=True, solution=False, locked=False)  # nbgrader locks grade cells anyway
    manual = _cell(grade=True, solution=True, points=2)
    readonly = _cell(grade=False, solution=False, locked=True)
    plain = _cell()
    assert [catalogue.is_locked(c) for c in (answer, tests, manual, readonly, plain)] == \
        [False, True, False, True, False]
    assert [catalogue.is_autograder_test(c) for c in (answer, tests, manual, readonly, plain)] == \
        [False, True, False, False, False]
    assert [catalogue.is_provided(c) for c in (answer, tests, manual, readonly, plain)] == \
        [False, False, False, True, False]
    assert not catalogue.is_autograder_test(_cell("markdown", grade=True, solution=False))
    assert catalogue.cell_source(answer) == "a = 1\nb = 2"
    with pytest.raises(TypeError):
        catalogue.cell_source({"source": 3})


def test_every_cell_has_one_role_and_grading_runs_the_students_code() -> None:
    Role = catalogue.Role
    demo = _cell()
    demo["metadata"]["tags"] = ["demo"]
    demo_test = _cell(grade=True, solution=False)
    demo_test["metadata"]["tags"] = ["demo"]
    cells = [_cell("markdown"), _cell(solution=True, grade=False, locked=False),
             _cell(grade=True, solution=False, locked=False), demo, demo_test,
             _cell(grade=False, solution=False, locked=True, grade_id="setup"), _cell(),
             _cell("markdown", grade=True, solution=False), _cell(grade=True, solution=True, points=2),
             {"cell_type": "code", "source": "", "metadata": {"nbgrader": [1], "tags": "demo"}}]
    assert [catalogue.cell_role(c) for c in cells] == [
        Role.PROSE, Role.ANSWER, Role.TESTS, Role.DEMO, Role.TESTS, Role.PROVIDED, Role.CODE,
        Role.PROVIDED, Role.ANSWER, Role.CODE]
    assert catalogue.RUN_WHEN_GRADING == {Role.ANSWER, Role.PROVIDED, Role.CODE}
    nb = catalogue.read_json(catalogue.get("01").solution())
    roles = {catalogue.grade_id(c): catalogue.cell_role(c) for c in nb["cells"] if catalogue.grade_id(c)}
    assert roles["setup"] is Role.PROVIDED
    for name in catalogue.get("01").graded:
        assert (roles[name], roles[f"test_{name}"]) == (Role.ANSWER, Role.TESTS)


def test_lessons_used_reads_code_not_comments_or_strings() -> None:
    code = '''
# my03 = load_my_code("03_scaled_dot_product_attention")
print('from coursekit.reference.lesson05 import LayerNorm')
from coursekit.reference.lesson04 import MultiHeadAttention
from coursekit.reference import lesson06
import coursekit.reference.lesson07
l08 = lesson_code("08")
my02 = coursekit.earlier.load_my_code("02_split_heads")
'''
    assert catalogue.lessons_used(code) == {"02", "04", "06", "07", "08"}
    assert catalogue.lessons_used("%matplotlib inline\nlesson_code('3')") == {"03"}
    assert catalogue.lessons_used("def broken(:") == set()


def test_exports_are_the_names_the_exported_cells_define() -> None:
    lesson = catalogue.get("03")
    assert lesson.exported_ids() == ("causal_mask", "padding_mask", "scaled_dot_product_attention",
                                     "fast_scaled_dot_product_attention")
    assert {"causal_mask", "padding_mask", "scaled_dot_product_attention",
            "fast_scaled_dot_product_attention"} <= set(lesson.exports())
    assert catalogue.get("01").exports() == ("dot_scores", "softmax")  # attention is graded with them
    assert catalogue.defined_names("x, (y, z) = 1, (2, 3)\nclass A: pass\ndef f(): w = 1") == \
        ["x", "y", "z", "A", "f"]


def test_a_lesson_id_is_two_digits_and_a_name() -> None:
    with pytest.raises(ValueError, match="NN_name"):
        Lesson("4_mha", "x")
    with pytest.raises(ValueError, match="share a number"):
        catalogue.Catalogue([Lesson("04_a", "a"), Lesson("04_b", "b")])


def _imported_modules(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {name for node in ast.walk(tree) for name in _imported_by(node)}


def _imported_by(node) -> set[str]:
    """The top-level packages an import statement names (``.``: a relative import)."""
    import ast

    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {"." if node.level else (node.module or "").split(".")[0]}
    return set()


def _imported_at_import(path) -> set[str]:
    """What importing the module imports: its imports outside functions and ``TYPE_CHECKING``."""
    import ast

    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        found.update(_imported_by(node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_coursekit_never_imports_the_grader() -> None:
    from grader.authoring.release import imports_grader

    for path in sorted((catalogue.ROOT / "coursekit").rglob("*.py")):
        assert not imports_grader(path.read_text(encoding="utf-8")), path
    assert imports_grader("from grader.kernel import grade") and imports_grader("import grader.check.engine")
    assert not imports_grader("import graders_of_mine\nfrom .grader import x")


def test_what_students_code_imports_of_coursekit_is_standard_library_only() -> None:
    import sys

    allowed = set(sys.stdlib_module_names) | {"coursekit"}
    for name in ("catalogue", "earlier", "settings"):
        path = catalogue.ROOT / "coursekit" / f"{name}.py"
        modules = _imported_modules(path) - {"."}
        # settings' helpers for lessons 09-11 (choose_device, load_preset) import torch when
        # called, and only then: a numpy lesson imports settings without torch installed
        assert modules <= allowed | ({"torch"} if name == "settings" else set()), (name, modules)
        assert _imported_at_import(path) - {"."} <= allowed, (name, _imported_at_import(path))


def test_settings_imports_torch_only_when_its_helpers_are_called() -> None:
    import subprocess
    import sys

    code = ("import sys; from coursekit import settings; "
            "assert 'torch' not in sys.modules; settings.choose_device(); assert 'torch' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=catalogue.ROOT)
    assert proc.returncode == 0, proc.stderr
