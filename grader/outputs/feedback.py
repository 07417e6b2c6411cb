"""``python -m grader return-feedback DIR...``: hand the feedback pages of ``grade`` back.

``grade`` writes ``DIR/feedback/<student_id>/<lesson>.html`` (points and hints, never a
hidden test). Two ways back to the students:

- ``--to FOLDER``: one folder per student, every lesson's page in it
  (``FOLDER/<student_id>/<lesson>.html``), to upload to an LMS, mail, or share;
- ``--nbgrader COURSE``: into nbgrader's own feedback layout,
  ``COURSE/feedback/<student_id>/<lesson>/<notebook>.html`` with the ``timestamp.txt`` and
  ``submission_secret.txt`` of the student's submission, so that ``nbgrader
  release_feedback <lesson>`` publishes the course grader's pages through the exchange and
  students get them with *Fetch Feedback* (or ``nbgrader fetch_feedback``). A submission
  that did not come through the exchange has no secret: it is listed, not released.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from coursekit import catalogue
from coursekit.errors import UserError
from grader.i18n.message import Message, msg
from grader.results.folder import Folder, RecordError


class FeedbackError(UserError):
    """A folder that is not ``grade``'s output; ``str(exc)`` says why."""


@dataclass
class Returned:
    copied: list[str] = field(default_factory=list)  # "<student>/<lesson>"
    skipped: list[Message] = field(default_factory=list)  # "<student>/<lesson>: why"


def _pages(out: Path) -> list[tuple[str, str, Path]]:
    """``(student, lesson, page)`` of every feedback page in a ``grade`` folder."""
    graded = Folder(out)
    if not graded.grades_csv.is_file() or not (out / "feedback").is_dir():
        raise FeedbackError(msg("{folder}: no grades.csv and feedback/ (a folder `grade --out` wrote?)",
                                folder=out))
    try:
        graded.schema()
    except RecordError as exc:
        raise FeedbackError(*exc.args) from None
    return list(graded.feedback_pages())


def to_folders(outs: list[str | Path], dest: str | Path) -> Returned:
    done = Returned()
    for out in outs:
        for student, lesson, page in _pages(Path(out)):
            target = Path(dest) / student / page.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
            done.copied.append(f"{student}/{lesson}")
    return done


def to_nbgrader(outs: list[str | Path], course: str | Path) -> Returned:
    course = Path(course)
    done = Returned()
    for out in outs:
        out = Path(out)
        for student, lesson, page in _pages(out):
            try:
                report = Folder(out).read_result(student)
            except RecordError as exc:
                raise FeedbackError(*exc.args) from None
            made = report.made if report is not None else None
            file = ((made.submission if made is not None else None) or {}).get("file")
            submitted = course / "submitted" / student / lesson
            secret = submitted / "submission_secret.txt"
            if not secret.is_file():
                done.skipped.append(msg("{student}/{lesson}: no submission_secret.txt (not "
                                        "submitted through the exchange)", student=student, lesson=lesson))
                continue
            name = Path(file).name if file else catalogue.get(lesson).student().name
            folder = course / "feedback" / student / lesson
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob("*.html"):
                stale.unlink()  # nbgrader's own page of the same notebook, if it made one
            shutil.copyfile(page, folder / f"{Path(name).stem}.html")
            shutil.copyfile(secret, folder / secret.name)
            stamp = submitted / "timestamp.txt"
            (folder / "timestamp.txt").write_text(
                stamp.read_text(encoding="utf-8") if stamp.is_file() else "", encoding="utf-8")
            done.copied.append(f"{student}/{lesson}")
    return done


def summary(done: Returned, where: Message | str, lang: str = "en") -> str:
    """What ``return-feedback`` copied and where, in ``lang`` (the instructor's)."""
    from grader.i18n import words

    t = words(lang)
    lines = [t(msg("copied {pages} feedback page(s) to {folder}", pages=len(done.copied), folder=where))]
    lines += ["  " + t(msg("not copied: {reason}", reason=line)) for line in done.skipped]
    return "\n".join(lines)
