"""``python -m grader report DIR``: one self-contained HTML page about a graded class.

Reads what ``python -m grader grade --out DIR`` wrote (``grades.csv``, ``results/*.json``,
``run.json``) and writes ``DIR/report.html``: the score histogram, each exercise's pass
rate, the most common hints per exercise with how many students got each, the
submissions that did not run to the end (timeouts, crashes, memory, unreadable), the
students to look at, and similarity flags on the long exercises with both listings side
by side (when the submitted notebooks are at hand: ``--submitted``, or else the folder
``grade`` read, which ``run.json`` records). Plots are inline SVG (matplotlib), the page needs no network and no
script.

The page and the summary it prints are in the class's language (``--lang``, else
``COURSE_LANG``, else the edition most of the class handed in: ``i18n.class_language``), the
students' hints as they read them; ``grades.csv`` and ``results/``, which it reads, stay English.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursekit.errors import UserError
from grader import i18n
from grader.check.messages import leading
from grader.common import templating
from grader.common.hint import Hint
from grader.common.templating import points
from grader.i18n import Message, concat, msg
from grader.results import Report
from grader.results.folder import Folder, RecordError, Status

OK = Status.OK
LOW_SHARE = 0.5  # a graded notebook under this share of the points is worth a look
COLORS = {"full": "#2e7d32", "partial": "#f2a900", "zero": "#c62828", "bar": "#3f6fb5"}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?")


@dataclass
class Student:
    student_id: str
    score: float
    max_score: float
    status: str
    message: str
    points: dict[str, float]
    hints: dict[str, str] = field(default_factory=dict)  # exercise -> its message
    # exercise -> its hints as data; absent for a folder written before (grader.results.folder)
    hint_data: dict[str, list[Hint]] = field(default_factory=dict)
    untouched: bool = False  # every answer cell still as handed out (results/<id>.json)
    report: Report | None = None  # its result and notes, to say `message` in another language
    edition: str = "en"  # of the notebook handed in (results/<id>.json's ``notebook``)


@dataclass
class ClassData:
    folder: Path
    lesson: str
    exercises: list[str]
    max_points: dict[str, float]
    students: list[Student]
    run: dict[str, Any]

    @property
    def max_score(self) -> float:
        return self.students[0].max_score if self.students else 0.0

    @property
    def editions(self) -> list[str]:
        return [s.edition for s in self.students if s.report is not None]


class ReportError(UserError):
    """The folder is not one ``grade`` wrote; ``str(exc)`` says why."""


def load(folder: str | Path) -> ClassData:
    graded = Folder(folder)
    try:
        grades = graded.read_grades()
        run = graded.read_run()
    except RecordError as exc:
        raise ReportError(*exc.args) from None
    path, rows = grades.path, grades.rows
    if not grades.written_by_grade:
        raise ReportError(msg("{path} is not a grades.csv written by `python -m grader grade`", path=path))
    if not rows:
        raise ReportError(msg("{path} has no students", path=path))
    exercises = grades.exercises
    students = [Student(r["student_id"], float(r["score"]), float(r["max_score"]), r["status"],
                        r["message"], {x: float(r[x] or 0) for x in exercises}) for r in rows]
    max_points: dict[str, float] = {}
    for student in students:
        try:
            report = graded.read_result(student.student_id)
        except RecordError as exc:
            raise ReportError(*exc.args) from None
        if report is not None:
            _read_back(student, report, max_points)
    return ClassData(graded.path, rows[0]["lesson"], exercises, max_points, students, run)


def _read_back(student: Student, report: Report, max_points: dict[str, float]) -> None:
    """What the page shows of the student's kept report (``max_points``: each exercise's,
    as the first result that has it says)."""
    student.report = report
    student.edition = i18n.notebook_edition(None, report.notebook) if report.notebook else "en"
    student.untouched = report.made is not None and report.made.untouched
    for x in report.exercises:
        student.hints[x.name] = x.message
        if report.hints_recorded:
            student.hint_data[x.name] = x.hints
        max_points.setdefault(x.name, x.max_points)


def said(student: Student, lang: str) -> str:
    """``grades.csv``'s message of ``student`` in ``lang``: the verdict and each note
    translated one by one (the joined message is no template), then any late note."""
    if lang == "en" or student.report is None:
        return student.message
    english = student.report.message
    rest = student.message[len(english):].strip() if student.message.startswith(english) else ""
    t = i18n.words(lang)
    return "".join(part for part in (i18n.localize(student.report, lang).said(t), t(rest)) if part)


@dataclass(frozen=True)
class Words:
    """The page's sentences with values in them, in its language (``t``: ``i18n.words``)."""

    t: Callable[[Message | str], str]

    def students(self, n: int) -> str:
        return self.t(msg("{n} student(s)", n=n))

    def generated(self, when: str) -> str:
        return self.t(msg("generated {when}", when=when))

    def active(self, n: int) -> str:
        return self.t(msg("{n} protections active", n=n))

    def of(self, top: str) -> str:
        return self.t(msg("out of {top}", top=top))

    def lost(self, n: int) -> str:
        return self.t(msg("{n} student(s) lost points", n=n))

    def shared(self, amount: float, coverage: float) -> str:
        share = f"{100 * coverage:.0f}"
        return self.t(msg("(shared unusual code: {amount}; {share}% of the shorter one's; line numbers are the cell's)", amount=format(amount, '.0f'), share=share))


# --- numbers ----------------------------------------------------------------------------

def summary(data: ClassData) -> dict[str, Any]:
    scores = [s.score for s in data.students]
    statuses = Counter(s.status for s in data.students)
    return {
        "students": len(scores),
        "mean": statistics.fmean(scores),
        "median": statistics.median(scores),
        "max_score": data.max_score,
        "full_marks": sum(1 for s in data.students if s.score >= s.max_score > 0),
        "statuses": dict(sorted(statuses.items(), key=lambda kv: (kv[0] != OK, -kv[1]))),
    }


def exercise_rows(data: ClassData) -> list[dict[str, Any]]:
    rows = []
    for name in data.exercises:
        top = data.max_points.get(name) or max((s.points[name] for s in data.students), default=0)
        points = [s.points[name] for s in data.students]
        full = sum(1 for p in points if top and p >= top)
        zero = sum(1 for p in points if p <= 0)
        rows.append({"name": name, "max": top, "mean": statistics.fmean(points), "full": full,
                     "partial": len(points) - full - zero, "zero": zero,
                     "pass_rate": full / len(points)})
    return rows


def hint_group(student: Student, exercise: str) -> tuple[str, Message | str]:
    """The group of the student's leading hint on ``exercise`` and its text: the mistake it
    diagnoses; a hint that names no mistake (a symptom, an error), or one of a folder
    written before hints were kept as data, by its text with numbers left out."""
    data = student.hint_data.get(exercise)
    if data:
        hint = leading(data[0].text)
        if data[0].mistake:
            return f"mistake:{data[0].mistake}", hint
        return f"{data[0].kind}:{_NUMBER.sub('#', str(hint))}", hint
    hint = leading(student.hints[exercise])
    return f"text:{_NUMBER.sub('#', str(hint))}", hint


def common_failures(data: ClassData, top: int = 5) -> dict[str, list[dict[str, Any]]]:
    """Per exercise, the most frequent leading hints among students who lost points there;
    hints that diagnose the same mistake count as one, and so do hints naming no mistake
    that differ only in numbers."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name in data.exercises:
        groups: dict[str, list[tuple[str, Message | str]]] = defaultdict(list)
        for s in data.students:
            top_points = data.max_points.get(name, 0)
            if s.status == OK and s.points[name] < top_points and s.hints.get(name):
                key, hint = hint_group(s, name)
                groups[key].append((s.student_id, hint))
        ranked = sorted(groups.values(), key=lambda g: (-len(g), str(g[0][1])))
        found[name] = [{"hint": Counter(h for _, h in g).most_common(1)[0][0], "count": len(g),
                        "students": sorted(sid for sid, _ in g)} for g in ranked[:top]]
        if len(ranked) > top:
            found[name].append({"hint": msg("{count} other hint(s)", count=len(ranked) - top),
                                "count": sum(len(g) for g in ranked[top:]), "students": []})
    return found


def not_finished(data: ClassData) -> list[Student]:
    return [s for s in data.students if s.status != OK]


def to_look_at(data: ClassData, flags: dict[str, list[Any]], lang: str = "en") -> list[dict[str, Any]]:
    """Students worth a look, with why (in ``lang``): did not run to the end, handed in an
    untouched notebook, scored under half, or wrote code unusually like someone else's."""
    t = i18n.words(lang)
    colon = "：" if lang == "zh" else ": "
    reasons: dict[str, list[str]] = defaultdict(list)
    for s in data.students:
        if s.status != OK:
            reasons[s.student_id].append(f"{s.status}{colon}{said(s, lang)}")
        elif s.untouched:
            reasons[s.student_id].append(t("handed in the notebook untouched (every answer cell "
                                           "is as handed out)"))
        elif s.max_score and s.score < LOW_SHARE * s.max_score:
            reasons[s.student_id].append(t(msg("scored {score} of {max_score}", score=points(s.score), max_score=points(s.max_score))))
    for exercise, found in flags.items():
        for f in found:
            for one, other in ((f.a, f.b), (f.b, f.a)):
                reasons[one.student].append(
                    t(msg("{exercise}: code identical to {other_student}'s (see below)", exercise=exercise, other_student=other.student)) if f.identical
                    else t(msg("{exercise}: code unusually like {other_student}'s (see below)", exercise=exercise, other_student=other.student)))
    order = {s.student_id: i for i, s in enumerate(data.students)}
    return [{"student": sid, "reasons": why} for sid, why in sorted(reasons.items(), key=lambda kv: order.get(kv[0], 0))]


# --- plots ------------------------------------------------------------------------------

def _svg(fig: Any) -> str:
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(width: float, height: float) -> Any:
    import matplotlib

    from coursekit.fonts import use_cjk_font

    matplotlib.rcParams["svg.hashsalt"] = "class-report"  # the same page for the same data
    use_cjk_font()  # a fallback for 汉字 only: Latin text keeps its face
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def histogram_svg(data: ClassData, t: Callable[[Message | str], str] = str) -> str:
    """Scores of the notebooks that ran, and (stacked, red) of those that did not."""
    scores = [s.score for s in data.students]
    ran = [s.score for s in data.students if s.status == OK]
    stopped = [s.score for s in data.students if s.status != OK]
    top = data.max_score or max(scores) or 1
    step = 1.0 if top <= 40 else top / 20
    edges = [i * step for i in range(int(top / step) + 2)]
    fig = _figure(6.4, 2.6)
    ax = fig.add_subplot()
    ax.hist([ran, stopped], bins=edges, stacked=True, color=[COLORS["bar"], COLORS["zero"]],
            edgecolor="white", align="left" if step == 1 else "mid",
            label=[t("graded"), t("did not run to the end")])
    median = statistics.median(scores)
    ax.axvline(median, color="#333", linestyle="--", linewidth=1)
    ax.annotate(t(msg("median {median}", median=points(median))), (median, 1), xycoords=("data", "axes fraction"),
                xytext=(-4, -2), textcoords="offset points", ha="right", va="top", fontsize=8)
    if stopped:
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    ax.set_xlabel(t(msg("points (of {maximum})", maximum=points(top))))
    ax.set_ylabel(t("students"))
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def exercises_svg(rows: list[dict[str, Any]], t: Callable[[Message | str], str] = str) -> str:
    fig = _figure(6.4, 0.45 * len(rows) + 0.9)
    ax = fig.add_subplot()
    names = [r["name"] for r in rows][::-1]
    left = [0] * len(rows)
    for kind, label in (("full", msg("full marks")), ("partial", msg("some points")), ("zero", msg("no points"))):
        values = [r[kind] for r in rows][::-1]
        ax.barh(names, values, left=left, color=COLORS[kind], label=t(label))
        for i, v in enumerate(values):
            if v:
                ax.text(left[i] + v / 2, i, str(v), ha="center", va="center", color="white", fontsize=8)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel(t("students"))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


# --- page -------------------------------------------------------------------------------

def listing(source: str, first_line: int, marked: set[int]) -> list[dict[str, Any]]:
    return [{"n": first_line + i, "text": line, "marked": i + 1 in marked}
            for i, line in enumerate(source.splitlines())]


def similarity(data: ClassData, submitted: Path | None) -> tuple[dict[str, list[Any]], Message]:
    """Flags per exercise, and a sentence on what was compared."""
    from coursekit import catalogue
    from grader.check.notebook import NotebookError, cells_to_run, read_notebook
    from grader.outputs.similarity import Settings, class_flags, eligible, lesson_context

    context = lesson_context(data.lesson)
    names = eligible(context, data.exercises)
    if not names:
        return {}, (msg("Similarity was not checked: every exercise of {lesson} is too short for similar code to mean anything.", lesson=data.lesson))
    if submitted is None:
        return {}, (msg("Similarity was not checked: the submitted notebooks were not found (pass --submitted SUBMITTED)."))
    cells = {}
    # nbgrader's layout, as `grade` reads it: <student>/<lesson>/<notebook of any edition>
    notebooks = [path.name for path in catalogue.get(data.lesson).notebooks("student").values()]
    for s in data.students:
        folder = submitted / s.student_id / data.lesson
        path = next((folder / name for name in notebooks if (folder / name).is_file()),
                    folder / notebooks[0])
        try:
            cells[s.student_id] = [src for _, src in cells_to_run(read_notebook(path))]
        except (NotebookError, OSError):
            continue
    flags = class_flags(data.lesson, cells, data.exercises, Settings(), context)
    return flags, (msg("Compared the {cells} readable notebooks on {names} (the other exercises are too short for similar code to mean anything).", cells=len(cells), names=', '.join(names)))


def render(data: ClassData, flags: dict[str, list[Any]], note: Message | str, lang: str = "en") -> str:
    """The page, in ``lang``."""
    t = i18n.words(lang)
    zh = lang == "zh"
    rows = exercise_rows(data)
    pairs = [{"exercise": ex, "a": f.a.student, "b": f.b.student, "shared": f.shared,
              "coverage": f.coverage, "identical": f.identical,
              "left": listing(f.a.source, f.a.first_line, f.lines_a),
              "right": listing(f.b.source, f.b.first_line, f.lines_b)}
             for ex, found in flags.items() for f in found]
    return templating.render(
        "class_report.html.j2", data=data, summary=summary(data), exercises=rows, failures=common_failures(data),
        unfinished=not_finished(data), look=to_look_at(data, flags, lang), pairs=pairs,
        similarity_note=note, histogram=histogram_svg(data, t), exercise_chart=exercises_svg(rows, t),
        generated=time.strftime("%Y-%m-%d %H:%M"), feedback_exists=lambda sid: (
            data.folder / "feedback" / sid / f"{data.lesson}.html").is_file(),
        lang=lang, t=t, say=Words(t), said=lambda s: said(s, lang), colon="：" if zh else ": ",
        comma="，" if zh else ", ", semicolon="；" if zh else "; ")


def write_report(folder: str | Path, submitted: str | Path | None = None,
                 lang: str | None = None) -> tuple[Path, str]:
    """Write ``DIR/report.html``; returns its path and a summary to print, both in the
    class's language (``i18n.class_language``)."""
    started = time.perf_counter()
    data = load(folder)
    lang = i18n.class_language(lang, data.editions)
    t = i18n.words(lang)
    if submitted is None and data.run.get("submitted"):
        submitted = data.run["submitted"]
    submitted_path = Path(submitted) if submitted and Path(submitted).is_dir() else None
    flags, note = similarity(data, submitted_path)
    target = data.folder / "report.html"
    target.write_text(render(data, flags, note, lang), encoding="utf-8")
    s = summary(data)
    n_flags = sum(len(f) for f in flags.values())
    lines: list[Message | str] = [msg("wrote {target}: {count} student(s), {lesson}", target=target, count=s['students'], lesson=data.lesson),
             msg("  scores: mean {mean}, median {median} of {max_score}; {full_marks} with full marks", mean=format(s['mean'], '.1f'), median=points(s['median']), max_score=points(s['max_score']), full_marks=s['full_marks']),
             msg("  status: {statuses}", statuses=", ".join(f"{k} {v}" for k, v in s["statuses"].items())),
             msg("  students to look at: {count}; similarity flags: {n_flags}", count=len(to_look_at(data, flags)), n_flags=n_flags),
             concat("  ", note),
             msg("  in {seconds} s", seconds=format(time.perf_counter() - started, ".1f"))]
    return target, "\n".join(t(line) for line in lines)
