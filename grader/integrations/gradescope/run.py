"""What ``run_autograder`` runs in Gradescope's container, as root, once per submission.

It finds the one notebook in ``/autograder/submission`` (whatever its name), grades it in
the same sandbox as ``python -m grader grade`` with the strongest isolation the container
allows, and writes ``/autograder/results/results.json`` (schema: ``results.schema.json``):
one test per exercise, named by its contract name, with the hints a student reads.
Gradescope's own files are made private to root first, so that student code running as
another uid can read neither the graders (they hold reference answers) nor the results.
What the instructor needs to debug (protections, limits, timings) goes to stdout, which
Gradescope shows to instructors only unless ``stdout_visibility`` says otherwise.

``AUTOGRADER_ROOT`` (default ``/autograder``) moves the whole layout, for tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from coursekit import catalogue, settings
from grader.common.limits import DEFAULT_LIMITS
from grader.common.templating import points
from grader.i18n import Message, choose, msg, words

ROOT_ENV = settings.GRADESCOPE_ROOT
CONFIG_NAME = "autograder.json"
# What grading takes beside the notebook's own work: the trusted grader and the sandbox's
# warm zygote with torch loaded (measured: 0.40 GiB PSS for a blank lesson 08 notebook,
# 0.57 GiB for the reference one). The notebook's cap leaves them this much room, but
# never goes under MIN_NOTEBOOK_BYTES (an rlimit cap counts the zygote's inherited pages).
GRADER_RESERVE_BYTES = 512 << 20
MIN_NOTEBOOK_BYTES = 1 << 30
RECOMMENDED_CONTAINER_BYTES = 2 << 30
IGNORED_PARTS = {"__MACOSX", ".ipynb_checkpoints"}
PRIVATE = "autograder-files-private"  # the protection this module adds to the sandbox's


@dataclass(frozen=True)
class Config:
    """``autograder.json``, written into the zip by the package builder."""

    lesson: str
    timeout_s: float = DEFAULT_LIMITS.wall_s
    memory_gib: float = DEFAULT_LIMITS.memory_gib
    isolation: str = "auto"
    visibility: str = "visible"
    stdout_visibility: str = "hidden"
    built: str = ""

    @classmethod
    def load(cls, path: Path) -> Config:
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def dumps(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


@dataclass(frozen=True)
class Layout:
    """Gradescope's folders (https://gradescope-autograders.readthedocs.io/en/latest/specs/)."""

    root: Path

    @classmethod
    def from_env(cls) -> Layout:
        return cls(settings.gradescope_root())

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def results(self) -> Path:
        return self.results_dir / "results.json"

    @property
    def results_dir(self) -> Path:
        return self.root / "results"


# --- the submission ---------------------------------------------------------------------

def find_notebook(folder: Path) -> tuple[Path | None, Message | None]:
    """The one notebook handed in, or ``(None, a sentence for the student)``."""
    if not folder.is_dir():
        return None, msg("No files were submitted: upload your notebook (.ipynb).")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _ignored(p.relative_to(folder)))
    notebooks = [p for p in files if p.suffix.lower() == ".ipynb"]
    if len(notebooks) == 1:
        return notebooks[0], None
    shown = ", ".join(p.relative_to(folder).as_posix() for p in (notebooks or files)[:10])
    if not notebooks:
        if files:
            return None, msg("No notebook was submitted (found: {shown}): upload your .ipynb file.", shown=shown)
        return None, msg("No notebook was submitted: upload your .ipynb file.")
    return None, msg("{count} notebooks were submitted ({shown}): submit exactly one .ipynb file, "
                     "the notebook of this lesson.", count=len(notebooks), shown=shown)


def _ignored(rel: Path) -> bool:
    return any(part in IGNORED_PARTS or part.startswith(".") for part in rel.parts)


def other_lesson(notebook: Path, lesson: str) -> catalogue.Lesson | None:
    """The lesson a notebook is, when not ``lesson`` (a student who uploaded the wrong
    notebook): ``grader.classgrade.find.other_lesson``."""
    from grader.check.notebook import NotebookError, read_notebook
    from grader.classgrade.find import other_lesson as of_notebook

    try:
        return of_notebook(read_notebook(notebook), catalogue.get(lesson))
    except (NotebookError, OSError):
        return None


def container_memory_limit() -> int | None:
    """The memory limit of this container (cgroup v2 or v1), or None when unlimited."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit():
            return None
        value = int(text)
        return value if value < 1 << 60 else None
    return None


def notebook_memory_bytes(cfg: Config) -> int:
    wanted = int(cfg.memory_gib * (1 << 30))
    limit = container_memory_limit()
    if limit is None:
        return wanted
    return max(MIN_NOTEBOOK_BYTES, min(wanted, limit - GRADER_RESERVE_BYTES))


@contextlib.contextmanager
def private_files(layout: Layout) -> Iterator[list[str]]:
    """As root, make /autograder (graders, results, submission metadata) root-only while the
    student's code runs, as Gradescope's best practices advise (``chmod o=``); restored after.
    Yields the protection names it adds."""
    if os.geteuid() != 0:
        yield []
        return
    modes = {}
    for path in (layout.root, layout.source, layout.results_dir, layout.submission):
        with contextlib.suppress(OSError):
            modes[path] = os.stat(path).st_mode & 0o7777
            os.chmod(path, 0o700)
    try:
        yield [PRIVATE]
    finally:
        for path, mode in modes.items():
            with contextlib.suppress(OSError):
                os.chmod(path, mode)


# --- results.json -----------------------------------------------------------------------

def zeroed(lesson: str, sentence: Message) -> list[Any]:
    """Every exercise of ``lesson`` at 0 of its points, ``sentence`` as its hint."""
    from grader.check.engine import exercise_points
    from grader.results import Status, not_graded

    return not_graded("", lesson, exercise_points(lesson), Status.MISSING, sentence).exercises


def test_entries(cfg: Config, exercises: list[Any], lang: str) -> list[dict[str, Any]]:
    """Gradescope's tests: one per exercise, its hints in ``lang``."""
    number = int(catalogue.get(cfg.lesson).number)
    t = words(lang)
    entries = []
    for i, x in enumerate(exercises, 1):
        message = "\n".join(t(h.text) for h in x.hints)  # the hints a student reads, one per line
        entries.append({
            "name": x.name,
            "number": f"{number}.{i}",
            "score": round(x.points, 4),
            "max_score": round(x.max_points, 4),
            "status": "passed" if x.passed else "failed",
            "output": t(msg("All checks passed.")) if x.passed else (message or t(msg("Not graded."))),
            "output_format": "text",
            "tags": [cfg.lesson],
            "visibility": cfg.visibility,
        })
    return entries


def document(cfg: Config, exercises: list[Any], lines: list[Message | str], *, status: str,
             seconds: float, extra: dict[str, Any], lang: str = "en") -> dict[str, Any]:
    """The whole results.json. ``lines`` are the student-facing summary, said in ``lang``
    as plain text."""
    tests = test_entries(cfg, exercises, lang)
    t = words(lang)
    return {
        "score": round(sum(t["score"] for t in tests), 4),
        "execution_time": round(seconds, 1),
        # plain text, shown as written: simple_format is HTML, whose escaped quotes
        # (`&#x27;`) reached students as they are
        "output": "\n".join(t(line) for line in lines),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": cfg.visibility,
        "stdout_visibility": cfg.stdout_visibility,
        "extra_data": {"lesson": cfg.lesson, "status": str(status), **extra},
        "tests": tests,
    }


def write_results(layout: Layout, doc: dict[str, Any]) -> None:
    layout.results_dir.mkdir(parents=True, exist_ok=True)
    tmp = layout.results_dir / f".results.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, layout.results)


# --- grading ----------------------------------------------------------------------------

@dataclass
class Graded:
    doc: dict[str, Any]
    protections: dict[str, Message | str]  # active protection -> how it is met
    missing: dict[str, Message | str]  # missing protection -> why
    memory_bytes: int


def grade(cfg: Config, layout: Layout, started: float) -> Graded:
    from grader.check.engine import exercise_points
    from grader.classgrade.classroom import Options, grade_notebook, workers
    from grader.classgrade.find import wrong_lesson
    from grader.common.limits import DEFAULT_LIMITS
    from grader.i18n import localize
    from grader.results import not_graded

    memory = notebook_memory_bytes(cfg)
    notebook, problem = find_notebook(layout.submission)
    if notebook is None:
        assert problem is not None
        doc = document(cfg, zeroed(cfg.lesson, problem), [problem], status="missing",
                       seconds=time.monotonic() - started, extra={"notebook": None}, lang=choose(None))
        return Graded(doc, {}, {}, memory)
    shown = notebook.relative_to(layout.submission).as_posix()
    with private_files(layout) as private, tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        opts = Options(lesson=cfg.lesson, out=Path(tmp) / "out", isolation=cfg.isolation,
                       limits=DEFAULT_LIMITS.with_(wall_s=cfg.timeout_s, memory_bytes=memory))
        with workers(opts) as pool:
            report = grade_notebook(notebook, shown, opts, pool.start)
            plan = pool.plan
    # a Chinese edition's hints in Chinese (or $COURSE_LANG's), as `check` and `grade` give them
    report = localize(report, choose(None, report.edition))
    lines: list[Message | str] = [msg("{lesson}: {score} of {top} points (notebook {shown}).", lesson=cfg.lesson,
                                      score=points(report.score), top=points(report.max_score), shown=shown)]
    if report.score == 0 and (seems := other_lesson(notebook, cfg.lesson)):
        # its errors (an earlier lesson it builds on, missing here) would only mislead
        sentence = wrong_lesson(seems, catalogue.get(cfg.lesson))
        report = localize(not_graded(shown, cfg.lesson, exercise_points(cfg.lesson),
                                     report.status, sentence), report.lang)
        lines.append(sentence)
    elif report.status != "ok":
        lines.append(report.said(words(report.lang)))
    if report.cell_errors:
        lines.append(msg("Cells that raised an error while your notebook ran:"))
        lines += [msg("  cell {cell}: {error}", cell=e.get('cell'), error=str(e.get('error'))[:200])
                  for e in report.cell_errors[:10]]
    active, missing = dict(plan.active), dict(plan.missing)
    if private and (plan.uid_drop or plan.bwrap):
        active[PRIVATE] = msg("/autograder (graders, results, submission metadata) is root-only while "
                              "the notebook runs as {who}", who=msg("another uid") if plan.uid_drop
                              else msg("a sandbox that does not even see it"))
    elif os.geteuid() == 0:
        missing[PRIVATE] = msg("the notebook runs as root here (no uid of its own, no bwrap): file "
                               "permissions cannot keep it out of /autograder")
    doc = document(cfg, report.exercises, lines, status=report.status,
                   seconds=time.monotonic() - started,
                   extra={"notebook": shown, "protections": list(active), "missing": list(missing)},
                   lang=report.lang)
    return Graded(doc, active, missing, memory)


GRADER_FAILED = msg("The autograder could not grade this submission because of a problem on our "
                    "side, not in your notebook. Please submit again; if it happens again, tell "
                    "your instructor.")
DID_NOT_FINISH = msg("Grading did not finish: the autograder was stopped before it could write "
                     "your results (Gradescope's time limit?). Please tell your instructor.")


def failure(cfg: Config, started: float, sentence: Message, why: str) -> dict[str, Any]:
    """results.json when the grading machinery itself failed (never the student's code), in
    the course's language (``COURSE_LANG``)."""
    return document(cfg, zeroed(cfg.lesson, sentence), [sentence], status="error",
                    seconds=time.monotonic() - started, extra={"error": why[:300]}, lang=choose(None))


def report_stdout(cfg: Config, outcome: Graded, seconds: float) -> None:
    """For the instructor (Gradescope's "Autograder Output")."""
    doc = outcome.doc
    print(f"lesson {cfg.lesson}  (package: {cfg.built or 'unknown build'})")
    print(f"notebook: {doc['extra_data'].get('notebook')}   status: {doc['extra_data']['status']}")
    print(f"isolation {cfg.isolation}: {len(outcome.protections)} protections active"
          + (f", {len(outcome.missing)} missing" if outcome.missing else ""))
    t = words(choose(None))
    for name, how in outcome.protections.items():
        print(t(msg("  + {name}: {how}", name=name, how=how)))
    for name, why in outcome.missing.items():
        print(t(msg("  - {name}: MISSING, {why}", name=name, why=why)))
    limit = container_memory_limit()
    print(f"limits per notebook: {cfg.timeout_s:g} s, {outcome.memory_bytes / (1 << 30):.2f} GiB "
          f"(container: {'no limit' if limit is None else f'{limit / (1 << 30):.2f} GiB'})")
    if limit is not None and limit < RECOMMENDED_CONTAINER_BYTES:
        print(f"WARNING: this container has {limit / (1 << 30):.2f} GiB of memory; grading with "
              f"torch needs about 0.6 GiB plus the notebook's own: raise it to 2 GiB or more "
              f"(Gradescope: the assignment's Autograder Settings)")
    for test in doc["tests"]:
        print(f"  {'✔' if test['status'] == 'passed' else '✘'} {test['name']:<28} "
              f"{points(test['score'])} / {points(test['max_score'])}")
    print(f"score {points(doc['score'])}; graded in {seconds:.1f} s")


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    layout = Layout.from_env()
    try:
        cfg = Config.load(layout.source / CONFIG_NAME)
    except (OSError, ValueError, TypeError) as exc:
        print(f"run_autograder: cannot read {layout.source / CONFIG_NAME}: {exc}", file=sys.stderr)
        return 2
    write_results(layout, failure(cfg, started, DID_NOT_FINISH, "did not finish"))  # if we are killed
    try:
        outcome = grade(cfg, layout, started)
    except Exception as exc:  # noqa: BLE001 - the student still gets a clear results.json
        traceback.print_exc(file=sys.stdout)
        outcome = Graded(failure(cfg, started, GRADER_FAILED, f"{type(exc).__name__}: {exc}"),
                          {}, {}, 0)
    write_results(layout, outcome.doc)
    report_stdout(cfg, outcome, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
