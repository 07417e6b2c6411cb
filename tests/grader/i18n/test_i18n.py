"""The grader speaks Chinese (grader/i18n/): every message a student may read has an id and
arguments, and a translation in a .po catalogue that cannot silently go stale; hints made of
hints render piece by piece, from their ids;
``check`` answers in the notebook's language, ``--lang`` and ``COURSE_LANG`` choose another;
the gradebook stays English."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from datetime import UTC

import pytest
from support import ROOT

from coursekit import catalogue
from grader import i18n
from grader.check.engine import grade_in_process
from grader.common.hint import Hint
from grader.i18n import catalogues, msg, with_detail
from grader.results import ExerciseResult, Report

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

ZH_LESSONS = [lesson.id for lesson in catalogue.COURSE if "zh" in lesson.editions]


# --- reading the ids -----------------------------------------------------------------------

SOURCE = '''
"""A docstring is not a message."""
MISTAKES = {"axis": "softmax over the wrong axis"}

def test_x(sub):
    """Nor is this one."""
    w = sub.call("softmax", x)
    check(ok, msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument", axis=axis))
    close(w, want, msg("rows of the weights should sum to 1" " (each query's)"))
    if "sum to" in text:
        pass
    print(t("total"))
    name = f"{prefix}.weight"
'''


def test_the_ids_are_the_messages_as_written() -> None:
    assert sorted(catalogues.ids_in_python(SOURCE)) == sorted([
        "softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument",
        "rows of the weights should sum to 1 (each query's)",
        "total",
    ])


def test_literal_braces_are_escaped() -> None:
    assert catalogues.ids_in_python('t("a set {0, 1} of two keys")') == ["a set {{0, 1}} of two keys"]
    assert i18n.fields("a set {{0, 1}} of {n} keys") == ["{n}"]
    assert str(msg("a set {{0, 1}} of {n} keys", n=2)) == "a set {0, 1} of 2 keys"


def test_a_template_is_read_once(monkeypatch) -> None:
    """A hidden test builds the message of every check it makes, passed or not (some 500 in
    a run of lesson 08's): each template is parsed the first time only."""
    from grader.i18n import message

    template = "a template read once: {x} of {y}"
    read = []
    original = str.__getitem__

    class Counting(str):
        def __getitem__(self, key):  # the parser reads the template through indexing
            read.append(key)
            return original(self, key)

    counted = Counting(template)
    assert message.parts(counted) == (("text", "a template read once: "), ("field", "x"),
                                      ("text", " of "), ("field", "y"))
    first = len(read)
    assert str(msg(counted, x=1, y=2)) == "a template read once: 1 of 2"
    assert len(read) == first and first > 0


def test_a_message_keeps_its_id_and_arguments_through_a_record() -> None:
    """A hint is kept as id + arguments + English text (the gradebook stays readable), and
    read back as the same message; pickled (a worker's answer) it stays one too."""
    import pickle

    hint = Hint(with_detail(msg("the output of {what} is wrong", what=msg("the decoder layer")),
                            msg("at index {worst}: yours {yours}", worst=[0, 2], yours=format(0.1234, ".2g"))),
                "axis")
    data = json.loads(json.dumps(hint.as_dict()))
    assert data["text"] == "the output of the decoder layer is wrong (at index [0, 2]: yours 0.12)"
    assert data["id"] == "{message} ({detail})" and data["args"]["message"]["args"]["what"]["id"] == "the decoder layer"
    back = Hint.from_dict(data)
    assert back == hint and isinstance(back.text, i18n.Message) and back.text.to_dict() == hint.text.to_dict()
    assert pickle.loads(pickle.dumps(hint.text)).to_dict() == hint.text.to_dict()
    assert Hint.from_dict({"text": "written before ids", "kind": "symptom"}).text == "written before ids"


def test_a_value_shown_otherwise_keeps_the_message_and_its_id() -> None:
    """A test that rewrites the values of a failure (lesson 11 shows 1e30 as inf) keeps the
    message: its id, its nested messages, its words (a string operation would lose them)."""
    hint = with_detail(msg("the logits are wrong"), msg("at index {worst}: yours {yours}", worst=[0], yours="-1e+30"))
    shown = i18n.map_values(hint, lambda v: v.replace("-1e+30", "-inf"))
    assert str(shown) == "the logits are wrong (at index [0]: yours -inf)" and shown.id == hint.id
    assert shown.args["detail"].id == "at index {worst}: yours {yours}"
    assert i18n.map_values("plain", str.upper) == "PLAIN"


# --- rendering ----------------------------------------------------------------------------

TABLE = {
    "softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument":
        "softmax(x, axis={axis}) 在第 0 轴上归一化：请使用参数 `axis`",
    "at index {worst}: yours {yours}, right {right}": "在下标 {worst} 处：你的是 {yours}，正确的是 {right}",
    "+{folded} related check{s} failed": "另有 {folded} 项相关检查未通过",
    "calling `{function}` raised {error_type}: {error}{where}":
        "调用 `{function}` 时抛出了 {error_type}：{error}{where}",
    "the output of {what} is wrong": "{what} 的输出不对",
    "the decoder layer": "解码器层",
    "{message} ({detail})": "{message}（{detail}）",
    "total": "总分",
}


@pytest.fixture()
def fake_zh(monkeypatch):
    monkeypatch.setattr(i18n, "catalogue", lambda lang: TABLE if lang == "zh" else {})


def test_a_hint_inside_a_hint_renders_piece_by_piece(fake_zh) -> None:
    evidence = msg("at index {worst}: yours {yours}, right {right}", worst=[0, 2], yours=0.1, right=0.3)
    note = msg("+{folded} related check{s} failed", folded=2, s="s")
    hint = with_detail(with_detail(msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` "
                                       "argument", axis=1), evidence), note)
    assert str(hint) == ("softmax(x, axis=1) normalises over axis 0: use the `axis` argument "
                    "(at index [0, 2]: yours 0.1, right 0.3) (+2 related checks failed)")
    text, left = i18n.render_checked(hint, "zh")
    assert left == []
    assert text == ("softmax(x, axis=1) 在第 0 轴上归一化：请使用参数 `axis`（在下标 [0, 2] 处：你的是 0.1，"
                    "正确的是 0.3）（另有 2 项相关检查未通过）")


def test_fields_may_change_order_and_messages_in_them_render_too(fake_zh) -> None:
    hint = msg("the output of {what} is wrong", what=msg("the decoder layer"))
    assert i18n.render(hint, "zh") == "解码器层 的输出不对"
    assert i18n.render("total", "zh") == "总分"  # a fixed word is its own id


def test_rendering_reads_the_id_never_the_english_text(fake_zh) -> None:
    """Two messages with the same English text and different ids render differently: the
    id decides, the text is not matched back (a plain string is only a fixed word)."""
    by_id = msg("the output of {what} is wrong", what="the decoder layer")
    assert i18n.render(by_id, "zh") == "the decoder layer 的输出不对"
    assert i18n.render("the output of the decoder layer is wrong", "zh") == "the output of the decoder layer is wrong"


def test_the_students_own_error_is_shown_as_it_is(fake_zh) -> None:
    error = msg("calling `{function}` raised {error_type}: {error}{where}", function="softmax",
                error_type="ValueError", error="operands could not be broadcast together", where=" (line 3)")
    text, left = i18n.render_checked(error, "zh")
    assert text == "调用 `softmax` 时抛出了 ValueError：operands could not be broadcast together (line 3)"
    assert left == []


def test_an_untranslated_message_is_reported_and_left_in_english(fake_zh) -> None:
    assert i18n.render_checked(msg("a sentence nobody translated"), "zh") == (
        "a sentence nobody translated", ["a sentence nobody translated"])
    # English words in an argument that is no message (it lost its id on the way) are reported
    assert i18n.render_checked(msg("the output of {what} is wrong", what="the decoder layer"), "zh")[1] == [
        "the decoder layer"]
    assert i18n.render(msg("anything"), "en") == "anything"


def test_the_language_is_the_option_then_the_environment_then_the_notebook(monkeypatch) -> None:
    monkeypatch.delenv("COURSE_LANG", raising=False)
    assert i18n.choose(None, "zh") == "zh" and i18n.choose(None, "en") == "en"
    assert i18n.choose("en", "zh") == "en"
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    assert i18n.choose(None, "en") == "zh" and i18n.choose("en", "en") == "en"


def test_a_notebook_tells_its_edition_by_name_or_by_its_title() -> None:
    nb = {"cells": [{"cell_type": "markdown", "source": "# 第 01 课 · 手算注意力：优与秀\n\n..."}]}
    assert i18n.notebook_edition(nb, "submitted/a/01_attention_by_hand/01_attention_by_hand.ipynb") == "zh"
    assert i18n.notebook_edition(None, "x/01_attention_by_hand.zh.ipynb") == "zh"
    nb["cells"][0]["source"] = "# Lesson 01 · Attention by hand"
    assert i18n.notebook_edition(nb, "01_attention_by_hand.ipynb") == "en"
    assert i18n.notebook_edition({"cells": [{"cell_type": "markdown", "source": 3}]}, "x.ipynb") == "en"


def test_localize_translates_a_copy_the_gradebook_keeps_english(fake_zh) -> None:
    hint = msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument", axis=1)
    report = Report("n.ipynb", "01_attention_by_hand", [ExerciseResult("softmax", 0.0, 4.0, [Hint(hint)])])
    shown = i18n.localize(report, "zh")
    assert shown.exercises[0].failures == [Hint("softmax(x, axis=1) 在第 0 轴上归一化：请使用参数 `axis`")]
    assert shown.lang == "zh" and report.lang == "en"
    assert str(report.exercises[0].failures[0].text).startswith("softmax(x, axis=1) normalises")


def test_localize_translates_the_notes_too() -> None:
    # The course's own catalogue: a call that hung, which file was graded, how late.
    from datetime import datetime, timedelta

    from grader.check.messages import describe
    from grader.classgrade.late import Lateness
    from grader.runtime.errors import CallHung

    submitted = datetime(2026, 3, 3, 10, tzinfo=UTC)
    report = Report("n.ipynb", "01_attention_by_hand", [], notes=[
        msg("A check of `{hung}` failed ({what}): its checks left score 0{again}.", hung="softmax",
            what=describe(CallHung("softmax(array float64 [4, 6], axis=0)", 2.0)),
            again=msg("; the exercises after it were graded in a fresh run of the notebook")),
        msg("Graded {notebook} (not at nbgrader's name {canonical_name}).",
            notebook="s1/01_attention_by_hand (1).ipynb", canonical_name="01_attention_by_hand.ipynb"),
        Lateness(submitted, submitted - timedelta(days=1), timedelta(days=1), 0.0).describe(),
        Lateness(submitted, submitted + timedelta(hours=5), timedelta(0), 0.0).describe(),
    ])
    shown = i18n.localize(report, "zh")
    assert shown.notes[0].startswith("`softmax` 的一项检查失败") and "重新运行" in shown.notes[0]
    assert shown.notes[1].startswith("评分的是 s1/01_attention_by_hand (1).ipynb")
    assert shown.notes[2].startswith("迟交 1 天（") and shown.notes[2].endswith("不扣分。")
    assert shown.notes[3] == "按时提交（提交于 2026-03-03 10:00:00 UTC，截止于 2026-03-03 15:00:00 UTC）。"
    assert str(report.notes[0]).startswith("A check of")


# --- the course's own notebooks -----------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("lesson", ZH_LESSONS)
def test_check_answers_a_chinese_notebook_in_chinese(lesson: str, warm_check_env) -> None:
    path = catalogue.get(lesson).student("zh")
    env = warm_check_env  # without COURSE_LANG
    run = [sys.executable, "-m", "grader", "check", str(path), "--format", "json"]
    zh = json.loads(subprocess.run(run, capture_output=True, text=True, cwd=ROOT, env=env, check=True).stdout)
    en = json.loads(subprocess.run(run + ["--lang", "en"], capture_output=True, text=True, cwd=ROOT,
                                   env=env, check=True).stdout)
    assert zh["score"] == en["score"] == 0.0 and zh["max_score"] == en["max_score"]
    for x_zh, x_en in zip(zh["exercises"], en["exercises"], strict=True):
        assert x_en["message"] and x_zh["message"] != x_en["message"]
        assert i18n.CJK_RE.search(x_zh["message"]), x_zh["message"]


@pytest.mark.parametrize("lesson", ZH_LESSONS)
def test_both_editions_score_the_same(lesson: str) -> None:
    entry = catalogue.get(lesson)
    for kind in ("solution", "student"):
        scores = {}
        for edition in ("en", "zh"):
            nb = catalogue.read_json(entry.notebook(kind, edition))
            report = grade_in_process(nb, lesson, notebook=entry.notebook(kind, edition).name)
            assert report.edition == edition
            scores[edition] = {e.name: e.points for e in report.exercises}
        assert scores["en"] == scores["zh"], kind


# --- coverage: the catalogue and the hints the graders really produce ----------------------

@pytest.mark.parametrize("late", [(0, 0, 30), (0, 0, 300), (0, 1, 0), (0, 14, 31 * 60), (1, 0, 180),
                                  (1, 11, 0), (2, 0, 0)])
def test_a_late_note_is_chinese_whatever_the_duration(late) -> None:
    """A late (and an on-time) note reads in Chinese, durations included (issue 25: 「迟交 14
    hours 31 minutes」): every shape of ``late.format_duration`` is one template."""
    from datetime import UTC, datetime, timedelta

    from grader.classgrade.late import Lateness

    days, hours, seconds = late
    delta = timedelta(days=days, hours=hours, seconds=seconds)
    submitted = datetime(2026, 3, 4, 10, tzinfo=UTC)
    for note in (Lateness(submitted, submitted - delta, delta, 0.1).describe(),
                 Lateness(submitted, submitted + delta, timedelta(0), 0.0).describe()):
        text, english = i18n.render_checked(note, "zh")
        assert not english and not re.search(r"[A-Za-z]{3,}", text.replace("UTC", "")), text


def test_chinese_hints_use_the_lessons_and_the_glossarys_words() -> None:
    """Issue 50: the hints said 「契约」 where the lessons say 练习要求/练习规定, and 「批量」 for
    a batch where the glossary (docs/zh-glossary.md) says 小批量 (批量规范化, 批量大小 and the
    batch axis keep their names)."""
    table = i18n.catalogue("zh")
    assert not [v for v in table.values() if "契约" in v]
    lone_batch = re.compile(r"(?<!小)批量(?!规范化|大小|维|轴)")
    assert not [v for v in table.values() if lone_batch.search(v)]


def test_every_id_in_the_source_has_a_chinese_translation() -> None:
    """A new or changed English message fails here until it is translated
    (``python -m grader.authoring i18n sync``, then ``missing``)."""
    result = i18n.coverage("zh")
    assert not result.missing, f"{len(result.missing)} id(s) without a translation, e.g. {result.missing[:3]}"
    assert not result.stale, f"translations of ids no longer in the source: {result.stale[:3]}"
    assert not result.bad_fields, f"translations naming a field their English lacks: {result.bad_fields[:3]}"
    chinese = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")
    entries = catalogues.read("zh")
    assert all(chinese.search(e.translation) for e in entries.values() if not e.same), \
        "a translation with no Chinese in it (flag one that stays English \"same\")"


def test_the_catalogue_is_a_po_file_that_babel_reads_back_unchanged(tmp_path) -> None:
    """The catalogue is gettext's format (a translator's tools read it); writing what was read
    gives the same file (sync makes no spurious diff)."""
    path = catalogues.po_path("zh")
    assert path.name == "grader.po" and path.parent.name == "LC_MESSAGES"
    entries = catalogues.read("zh")
    copy = catalogues.write("zh", entries, root=tmp_path)
    assert copy.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert "zh" in i18n.LANGUAGES and catalogues.languages(tmp_path) == ("en", "zh")


def test_the_catalogue_is_in_the_order_sync_writes() -> None:
    """Entries stand where ``i18n sync`` puts them (by the first file an id is written in), so
    that a sync adds and drops entries in place: one appended at the end by hand would move, and
    the next maintainer's sync would rewrite the whole file."""
    entries = catalogues.read("zh")
    assert list(entries) == catalogues.in_sync_order(catalogues.source_templates())


def test_sync_adds_new_ids_empty_drops_stale_ones_and_makes_a_new_language(tmp_path, monkeypatch) -> None:
    """``i18n sync``: every id of the source in, with an empty msgstr when new; a translation
    kept; one whose id left the source dropped; ``--lang`` of a language with no catalogue yet
    makes its file (a new language is one file)."""
    monkeypatch.setattr(catalogues, "LOCALE_DIR", tmp_path)
    kept = "{message} ({detail})"
    catalogues.write("fr", {kept: catalogues.Entry("{message} ({detail})!"),
                            "a sentence no longer in the source": catalogues.Entry("une phrase")})
    catalogues.table.cache_clear()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert i18n.main(["sync", "--lang", "fr"]) == 1  # the new ids are missing
    entries = catalogues.read("fr")
    assert set(entries) == set(catalogues.source_templates()) and "fr: 1 of" in out.getvalue()
    assert entries[kept].translation == "{message} ({detail})!"
    assert sum(1 for e in entries.values() if not e.translation) == len(entries) - 1
    with contextlib.redirect_stdout(io.StringIO()):
        assert i18n.main(["sync", "--lang", "de"]) == 1
    assert catalogues.languages(tmp_path) == ("en", "de", "fr")
    catalogues.table.cache_clear()


def test_the_same_in_chinese_is_a_mark_not_a_copy() -> None:
    """A translation that is the English itself counts as missing; the flag "same" says "the
    same in Chinese, on purpose" and renders the English (issue 25: status counted 33 copies)."""
    entries = {"a log line for {who}": catalogues.Entry("", same=True),
               "a copy of {who}": catalogues.Entry("a copy of {who}"), "a word": catalogues.Entry("一个词")}
    result = i18n.coverage("zh", list(entries), entries=entries)
    assert result.missing == ["a copy of {who}"] and result.same == ["a log line for {who}"]
    assert result.translated == 2 and not result.bad_fields


def _hints_of(nb: dict, lesson: str) -> list[str]:
    from grader.check.engine import grade_in_process

    return [h.text for e in grade_in_process(nb, lesson, seed=20260101).exercises for h in e.hints]


def _untranslated(hints: list[str]) -> dict[str, list[str]]:
    found = {}
    for hint in dict.fromkeys(hints):
        text, left = i18n.render_checked(hint, "zh")
        if left or not i18n.CJK_RE.search(text) or not isinstance(hint, i18n.Message):
            found[hint] = left or ["(plain text: no id)"]
    return found


@pytest.mark.parametrize("lesson", [x.id for x in catalogue.COURSE])
def test_every_hint_of_the_planted_bugs_and_blank_notebooks_translates(lesson: str) -> None:
    """Every hint that grading the lesson's planted bugs (tests/planted), its blank student
    notebook and its reference produces reads in Chinese, with no English sentence left."""
    import json as _json

    from planted import modules

    entry = catalogue.get(lesson)
    hints = _hints_of(catalogue.read_json(entry.student()), lesson)
    assert hints, "a blank notebook gets hints"
    assert not _hints_of(catalogue.read_json(entry.solution()), lesson)
    module = next(m for m in modules() if m.LESSON == lesson)
    base = _json.dumps(catalogue.read_json(entry.solution()))
    for variant in module.BUGS:
        hints += _hints_of(variant.apply(_json.loads(base)), lesson)
    left = _untranslated(hints)
    assert not left, f"{len(left)} hint(s) without a full translation: " + "; ".join(
        f"{h!r} (left: {parts})" for h, parts in list(left.items())[:3])


def test_a_chinese_feedback_page_says_everything_in_chinese() -> None:
    """The verdict and each note are translated one by one (the joined sentence is no
    template), and the page's own punctuation is full-width."""
    from datetime import datetime, timedelta

    from grader.classgrade.late import Lateness
    from grader.outputs.render import feedback_html
    from grader.results import ExerciseResult, Report

    due = datetime(2026, 3, 2, 22, 59, tzinfo=UTC)
    for late in (timedelta(0), timedelta(days=1, hours=11)):
        note = Lateness(due + late, due, late, 0.2 if late else 0.0).describe()
        report = Report("hank.zh.ipynb", "01_attention_by_hand",
                        [ExerciseResult("softmax", points=4.0, max_points=4.0)], notes=[note])
        page = feedback_html(i18n.localize(report, "zh"), "hank", penalty=0.8 if late else 0.0)
        body = page.split("<body>", 1)[1]
        assert "得分：4 / 4。" in body and "Graded" not in body and "late" not in body and "On time" not in body
        assert "学生：<b>hank</b>" in body
        if late:
            assert "（原始分数 4，迟交扣分 0.8）" in body
        english = feedback_html(report, "hank")
        assert "Student: <b>hank</b>" in english and "Graded: 4 of 4 points. " in english


def test_chinese_hints_are_chosen_and_folded_as_in_english() -> None:
    """localize keeps each hint's kind (a diagnosis first, as in English), and the count of
    folded checks is Chinese too."""
    from grader.check.messages import explain
    from grader.results import ExerciseResult, Report
    from grader.runtime.errors import SubmissionError

    wrong = with_detail(msg("the weights of the 优秀 example should be softmax(Q Kᵀ / √d_k) with d_k = 6"),
                        msg("largest difference {largest} at index {worst}", largest=0.5, worst=[1, 1]))
    failures = [Hint(wrong),
                Hint(msg("the scores are K·Qᵀ: row i must be query i, so use dot_scores(Q, K) (Q first)"),
                     "scores_transposed"),
                explain(SubmissionError("attention", "ValueError", "boom"), "attention")]
    report = Report("a.zh.ipynb", "01_attention_by_hand", [ExerciseResult("attention", 1.5, 4.0, failures)])
    english = report.exercises[0].hints
    chinese = i18n.localize(report, "zh").exercises[0].hints
    assert str(english[0].text).startswith("the scores are K·Qᵀ") and str(english[0].text).endswith("(+2 related checks failed)")
    assert chinese[0].mistake == "scores_transposed" and chinese[0].text.endswith("（另有 2 项相关检查未通过）")
    assert "related" not in chinese[0].text and i18n.CJK_RE.search(chinese[0].text)
    assert failures[2].kind == "error" and i18n.CJK_RE.search(i18n.render(failures[2].text, "zh"))
