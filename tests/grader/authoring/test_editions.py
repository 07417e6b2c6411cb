"""A lesson's editions share their code (grader/authoring/editions.py): every second edition's code
cells equal the English ones, comments and translated strings aside; the comparison
catches each way they can drift apart; sync carries English code changes into an edition
without losing its translations, and lists what is left to translate."""

from __future__ import annotations

import copy
import re

import pytest
from support import ROOT

from coursekit import catalogue
from grader.authoring import editions

WITH_ZH = [lesson.id for lesson in catalogue.COURSE if "zh" in lesson.editions]


# --- the drift test, on the course's own notebooks ----------------------------------------

@pytest.mark.parametrize("kind", ["solution", "student"])
@pytest.mark.parametrize("lesson", WITH_ZH)
def test_every_edition_shares_the_english_code(lesson: str, kind: str) -> None:
    entry = catalogue.get(lesson)
    problems = editions.compare_files(entry.notebook(kind), entry.notebook(kind, "zh"))
    assert not problems, f"{entry.notebook(kind, 'zh').relative_to(ROOT)} drifted from English " \
        f"(`python -m grader.authoring.editions sync {entry.number}`):\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("lesson", WITH_ZH)
def test_every_edition_is_translated_and_in_sync(lesson: str) -> None:
    """Nothing left in English, nothing stale: `python -m grader.authoring.editions status` is clean."""
    entry = catalogue.get(lesson)
    synced, report = editions.sync(editions.read(entry.solution()), editions.read(entry.solution("zh")))
    assert not report.changed and not report.to_translate, \
        f"{lesson}: " + "; ".join(report.lines())


@pytest.mark.parametrize("lesson", WITH_ZH)
def test_a_chinese_edition_reads_as_one(lesson: str) -> None:
    """Its title line is the catalogue's Chinese title, and all its prose is Chinese."""
    entry = catalogue.get(lesson)
    cells = catalogue.read_json(entry.solution("zh"))["cells"]
    assert cells[0]["source"].splitlines()[0] == entry.heading("zh")
    prose = [c["source"] for c in cells if c["cell_type"] == "markdown"]
    chinese = [p for p in prose if len(editions.CJK.findall(p)) > 0.2 * len(p.split())]
    assert len(chinese) == len(prose), [p[:60] for p in prose if p not in chinese]


PLOT = re.compile(r"\bplt\.|\.imshow\(|\.plot\(|\.semilogx\(|\bsubplots\(")


@pytest.mark.parametrize("lesson", WITH_ZH)
def test_a_chinese_edition_registers_the_cjk_font_before_its_first_plot(lesson: str) -> None:
    """Its plots have Chinese labels: without the course's font a reader sees boxes."""
    registered = False
    for cell in catalogue.code_cells(catalogue.read_json(catalogue.get(lesson).solution("zh"))):
        call, plot = cell["source"].find("use_cjk_font()"), PLOT.search(cell["source"])
        assert registered or not plot or 0 <= call < plot.start(), (
            f"{lesson}: cell {cell.get('id')} plots before use_cjk_font() is called (add it to "
            "the English notebook's first plotting cell, then `python -m grader.authoring.editions sync`)")
        registered = registered or call >= 0


@pytest.mark.parametrize("lesson", WITH_ZH)
def test_bold_text_renders_in_both_editions(lesson: str) -> None:
    """CommonMark closes ``**`` after punctuation only before a space or punctuation:
    ``**优秀！**做梦`` shows its asterisks. (mistune, nbconvert's parser, follows the rule.)"""
    import mistune

    render = mistune.create_markdown()
    for edition, path in catalogue.get(lesson).notebooks().items():
        for cell in catalogue.read_json(path)["cells"]:
            if cell["cell_type"] == "markdown":
                html = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", render(cell["source"]), flags=re.S)
                assert "**" not in html, f"{lesson} ({edition}) cell {cell.get('id')}: unrendered ** in " \
                    f"{html[max(0, html.find('**') - 40):html.find('**') + 40]!r} (use <strong>…</strong>)"


# --- what counts as the same code ---------------------------------------------------------

SAME = [
    ("x = 1  # one", "x = 1  # 一"),
    ('assert ok, "rows should sum to 1"', 'assert ok, "每一行之和应为 1"'),
    ('def f():\n    """Return the scores."""\n    return 1', 'def f():\n    """返回分数。"""\n    return 1'),
    ('print(f"got {a} of {b}")', 'print(f"{b} 中的 {a}")'),            # word order may change
    ('plt.xlabel("key")', 'plt.xlabel("键")'),
    ('%matplotlib inline\nimport numpy as np', '%matplotlib inline\nimport numpy as np'),
    ("def f():\n    ### BEGIN SOLUTION\n    return 1  # the answer\n    ### END SOLUTION",
     "def f():\n    ### BEGIN SOLUTION\n    return 1  # 答案\n    ### END SOLUTION"),
]

DIFFERENT = [
    ("return Q @ K.T", "return K @ Q.T"),
    ('### BEGIN HIDDEN TESTS\ngrade("01", "softmax", globals())\n### END HIDDEN TESTS',  # hidden: verbatim
     '### BEGIN HIDDEN TESTS\ngrade("01", "软最大", globals())\n### END HIDDEN TESTS'),
    ('### BEGIN HIDDEN TESTS\ngrade("01", "softmax", globals())  # hook\n### END HIDDEN TESTS',
     '### BEGIN HIDDEN TESTS\ngrade("01", "softmax", globals())  # 钩子\n### END HIDDEN TESTS'),
    ('x = "relu"', 'x = "gelu"'),                                        # a word, not translated
    ('target = "一千二百三十四"', 'target = "一千二百三十"'),             # Chinese data is code
    ('print(f"got {a.shape}")', 'print(f"得到 {a.size}")'),              # a formatted expression
    ('print(f"got {a}")', 'print("得到")'),
    ("x = 1.0", "x = 1"),
    ("%matplotlib inline\nx = 1", "%matplotlib widget\nx = 1"),
    ("def f():\n    ### BEGIN SOLUTION\n    a = 1\n    return a\n    ### END SOLUTION",
     "def f():\n    ### BEGIN SOLUTION\n    a = 1\n    ### END SOLUTION\n    return a"),
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", "def f():\n    return 1"),
    ("x = (1,\n 2)", "x = (1,\n 3)"),
    ("a b c", "a b d"),                                                  # not Python: tokens
]


@pytest.mark.parametrize("english, other", SAME)
def test_comments_and_translated_strings_are_not_code(english: str, other: str) -> None:
    assert editions.code_difference(english, other) is None


@pytest.mark.parametrize("english, other", DIFFERENT)
def test_any_other_difference_is_drift(english: str, other: str) -> None:
    assert editions.code_difference(english, other) is not None


def test_the_difference_names_the_english_line() -> None:
    where = editions.code_difference("x = 1\ny = 2\nz = 3", "x = 1\ny = 5\nz = 3")
    assert where == "line 2: y = 2"


# --- each way two notebooks can drift -----------------------------------------------------

@pytest.fixture(scope="module")
def lesson01() -> dict:
    return editions.read(catalogue.get("01").solution())


def _translated(english: dict) -> dict:
    """A stand-in Chinese edition: prose and a few comments and messages translated."""
    zh = editions.new_edition(english)
    for cell in zh["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = "中文：" + cell["source"]
        else:
            cell["source"] = cell["source"].replace('"each row should sum to 1"', '"每一行之和应为 1"')
            cell["source"] = cell["source"].replace("# 优\n", "# “优”\n")
    return zh


def _code(nb: dict, grade_id: str) -> dict:
    return next(c for c in nb["cells"] if catalogue.grade_id(c) == grade_id)


def test_a_translation_is_not_drift(lesson01: dict) -> None:
    zh = _translated(lesson01)
    assert _code(zh, "test_softmax")["source"] != _code(lesson01, "test_softmax")["source"]
    assert editions.compare(lesson01, zh) == []


def _drifted(english: dict, change) -> list[str]:
    zh = _translated(english)
    change(zh)
    return editions.compare(english, zh)


def _set(cell: dict, **nbgrader) -> None:
    cell["metadata"]["nbgrader"].update(nbgrader)


def _by_id(nb: dict, cell_id: str) -> dict:
    return next(c for c in nb["cells"] if c["id"] == cell_id)


def _swap_code_cells(nb: dict) -> None:
    cells = nb["cells"]
    i = cells.index(_code(nb, "dot_scores"))
    j = cells.index(_code(nb, "softmax"))
    cells[i], cells[j] = cells[j], cells[i]


DRIFTS = {
    "code": lambda nb: _code(nb, "dot_scores").update(
        source=_code(nb, "dot_scores")["source"].replace("Q @ K.T", "K @ Q.T")),
    "visible test": lambda nb: _code(nb, "test_softmax").update(
        source=_code(nb, "test_softmax")["source"].replace("1 / 3", "0.33")),
    "hidden test hook": lambda nb: _code(nb, "test_attention").update(
        source=_code(nb, "test_attention")["source"].replace('"attention", globals', '"softmax", globals')),
    "grade id": lambda nb: _set(_code(nb, "test_softmax"), grade_id="test_softmax2"),
    "points": lambda nb: _set(_code(nb, "test_softmax"), points=5.0),
    "lock": lambda nb: _set(_code(nb, "setup"), locked=False),
    "tag": lambda nb: next(c for c in nb["cells"] if "demo" in catalogue.tags(c))["metadata"].pop("tags"),
    "order": _swap_code_cells,
    "deleted cell": lambda nb: nb["cells"].remove(_code(nb, "data")),
    "extra cell": lambda nb: nb["cells"].insert(3, {"cell_type": "code", "id": "extra", "metadata": {},
                                                    "source": "x = 1", "outputs": [], "execution_count": None}),
    "kernel": lambda nb: nb["metadata"]["kernelspec"].update(name="python2"),
}


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_each_drift_is_caught(lesson01: dict, drift: str) -> None:
    assert _drifted(lesson01, DRIFTS[drift]), f"{drift} was not caught"


# --- sync ---------------------------------------------------------------------------------

def test_sync_carries_code_changes_and_keeps_translations(lesson01: dict) -> None:
    zh = _translated(lesson01)
    english = copy.deepcopy(lesson01)
    test = _code(english, "test_softmax")
    test["source"] = test["source"].replace(
        'assert np.allclose(w[1], 1 / 3), "equal scores give equal weights"\n',
        'assert np.allclose(w[1], 1 / 3), "equal scores give equal weights"\n'
        'assert w.dtype == np.float64, "softmax should return float64"\n')
    synced, report = editions.sync(english, zh)
    assert editions.compare(english, synced) == []
    source = _code(synced, "test_softmax")["source"]
    assert '"每一行之和应为 1"' in source and '"softmax should return float64"' in source
    assert report.merged == {test["id"]: 1}
    assert test["id"] in report.stale or test["id"] in report.to_translate


def test_sync_adds_removes_and_reorders_cells_with_their_translation(lesson01: dict) -> None:
    zh = _translated(lesson01)
    prose = _by_id(zh, "e7c68de2")               # "## 1. Two characters, six features each"
    split = copy.deepcopy(prose)                 # a translation may split a prose cell in two
    split["id"] = "zh-extra"
    zh["cells"].insert(zh["cells"].index(prose) + 1, split)
    english = copy.deepcopy(lesson01)
    english["cells"].insert(1, {"cell_type": "markdown", "id": "new-prose", "metadata": {},
                                "source": "A new paragraph."})
    english["cells"].remove(_by_id(english, "a1c0f001"))  # "### Attention is a soft dictionary lookup"
    _swap_code_cells(english)
    synced, report = editions.sync(english, zh)
    assert editions.compare(english, synced) == []
    ids = [c["id"] for c in synced["cells"]]
    at = ids.index("new-prose")
    assert ids[at - 1] == "d284a115" and ids[ids.index("e7c68de2") + 1] == "zh-extra"
    assert ids.index("a6fa01d3") < ids.index("e7c68de2")
    assert "a1c0f001" not in ids and report.removed == ["a1c0f001"]
    assert report.added == ["new-prose"]
    assert _by_id(synced, "e7c68de2")["source"].startswith("中文：")


def test_changed_english_prose_is_listed_as_stale_until_accepted(lesson01: dict) -> None:
    zh, _ = editions.sync(lesson01, _translated(lesson01))
    english = copy.deepcopy(lesson01)
    _by_id(english, "e7c68de2")["source"] += "\nOne more sentence."  # a prose cell
    _, report = editions.sync(english, zh)
    assert report.stale == ["e7c68de2"] and not report.changed
    assert editions.accept(english, zh, None) == ["e7c68de2"]
    _, report = editions.sync(english, zh)
    assert report.stale == []


def test_an_untranslated_cell_is_listed_unless_accepted_as_it_is(lesson01: dict) -> None:
    zh, _ = editions.sync(lesson01, _translated(lesson01))
    cid = "e7c68de2"  # a prose cell
    _by_id(zh, cid)["source"] = _by_id(lesson01, cid)["source"]
    assert cid in editions.sync(lesson01, zh)[1].untranslated
    editions.accept(lesson01, zh, [cid])
    assert cid not in editions.sync(lesson01, zh)[1].untranslated


def test_a_change_that_cannot_be_merged_takes_the_english_cell(lesson01: dict) -> None:
    zh = _translated(lesson01)
    english = copy.deepcopy(lesson01)
    test = _code(english, "test_softmax")
    test["source"] = test["source"].replace('"each row should sum to 1"', 'f"rows: {w.sum(-1)}"')
    synced, report = editions.sync(english, zh)
    assert _code(synced, "test_softmax")["source"] == test["source"]
    assert report.merged[test["id"]] > 0


def test_the_command_line_starts_syncs_accepts_and_checks(tmp_path, capsys) -> None:
    import shutil
    from dataclasses import replace

    lesson = replace(catalogue.get("01"), editions=("en", "zh"))
    course = catalogue.Catalogue([lesson], ROOT).at(tmp_path)
    shutil.copytree(ROOT / "solutions" / lesson.id, tmp_path / "solutions" / lesson.id)
    course.get("01").solution("zh").unlink(missing_ok=True)
    assert editions.main(["new", "01"], course) == 0
    assert editions.main(["new", "01"], course) == 1          # never overwrites a translation
    assert editions.main(["check", "01"], course) == 0
    english = editions.read(course.get("01").solution())
    english["cells"][2]["source"] += "\nOne more sentence."
    cell = _code(english, "dot_scores")
    cell["source"] = cell["source"].replace("return Q @ K.T", "return np.matmul(Q, K.T)")
    editions.write(english, course.get("01").solution())
    assert editions.main(["check", "01"], course) == 1
    assert "the code differs" in capsys.readouterr().out
    assert editions.main(["sync", "01"], course) == 0
    out = capsys.readouterr().out
    assert "code updated from English: 98058844" in out and "not translated yet" in out
    assert editions.main(["check", "01"], course) == 0
