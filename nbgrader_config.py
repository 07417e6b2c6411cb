"""nbgrader configuration of the course: reference notebooks in solutions/, student
notebooks generated into lessons/ (``nbgrader generate_assignment <lesson>``).

Each lesson may have two editions (``NN_name.ipynb``, ``NN_name.zh.ipynb``). A course
holds one of them, or both for students to choose: ``COURSE_EDITION=en`` (default), ``zh``
or ``both`` (see grader/integrations/nbgrader/editions.py and the README's instructors' section)."""

import importlib.util
import warnings
from pathlib import Path

c = get_config()  # noqa: F821 - provided by nbgrader
HERE = Path(__file__).resolve().parent


c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "lessons"
# Hidden test cells call grader.kernel.grade; give each notebook time to run and grade.
c.ExecutePreprocessor.timeout = 300

# Autograde without false alarms (jupyter/nbgrader#1961): the hidden tests stripped from a
# released test cell are put back in silence; a locked cell a student changed still logs
# "Attribute 'checksum' for cell ... has changed!".
# (Only where this course's grader package is importable, as autograde's kernels need it.)
GRADER = importlib.util.find_spec("grader") is not None and \
    importlib.util.find_spec("grader.integrations.nbgrader.cells") is not None
if GRADER:
    c.Autograde.sanitize_preprocessors = [
        "nbgrader.preprocessors.ClearOutput",
        "nbgrader.preprocessors.DeduplicateIds",
        "nbgrader.preprocessors.OverwriteKernelspec",
        "grader.integrations.nbgrader.cells.CourseOverwriteCells",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
# Autograde runs no student code as you: the course's sandbox grades each submitted
# notebook (as `python -m grader grade` does: a fresh sandboxed worker per notebook, the
# reference solutions and hidden tests out of its reach) and writes each test cell's points
# and hints for nbgrader's gradebook, feedback and export (grader/integrations/nbgrader/sandbox.py).
# COURSE_AUTOGRADE=kernel restores nbgrader's own Execute, which runs every notebook in a
# Jupyter kernel of the account running autograde: a notebook can then read the solutions
# and hidden tests, write into your home folder and fake its scores. Use it only for
# notebooks you trust.
# (grader.integrations.nbgrader.editions.configure, at the end of this file, puts it in place.) The
# sandbox's options are `grade`'s --isolation strict, --require and --timeout:
#   c.SandboxedAutograde.isolation = "strict"
#   c.SandboxedAutograde.require = "bwrap,seccomp"
#   c.SandboxedAutograde.timeout = 120

# nbgrader 0.9's gradebook code predates SQLAlchemy 2's session rules: each submission logs
# three "SAWarning: Object of type <Submitted...> not in session" that change nothing.
warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session")
# Each kernel would log "Kernel is running over TCP without encryption" (it listens on
# localhost only): kernels log errors only; what a notebook prints is unaffected.
# The kernels nbgrader starts (validate, autograde, the Validate button) are told that the
# notebook is being graded, so long demonstrations such as lesson 09's training run take
# their small "smoke" preset. Set in the kernel only: JupyterLab's server loads this file
# when Validate is pressed, and an environment variable set here would reach every kernel
# the server starts afterwards, the students' own included.
c.Execute.extra_arguments = [
    "--IPKernelApp.log_level=ERROR",
    "--IPKernelApp.exec_lines=__import__('os').environ.setdefault('COURSE_GRADING', '1')",
]

# Late work: due dates, extensions and the penalty rule of deadlines.toml (grader.classgrade.late),
# the same for nbgrader and `python -m grader grade`. `python -m grader deadlines` writes
# the due dates and extensions into nbgrader's gradebook (at any time of the term), and
# autograde gives each submission it grades the student's extension from the file.
if GRADER and (HERE / "deadlines.toml").is_file():
    c.AssignLatePenalties.plugin_class = "grader.integrations.nbgrader.late.CoursePenalty"
    c.CoursePenalty.deadlines = str(HERE / "deadlines.toml")
    c.SyncSubmission.deadlines = str(HERE / "deadlines.toml")

# `nbgrader zip_collect LESSON` for Canvas's "Download Submissions" zip, saved as
# downloaded/LESSON/archive/submissions.zip: the Canvas user id becomes the student id,
# and a renamed notebook (01_attention_by_hand-1.ipynb, "... (1).ipynb") the lesson's name.
if GRADER:
    c.ZipCollectApp.collector_plugin = "grader.integrations.nbgrader.collect.CourseCollector"
# `nbgrader release_feedback LESSON` in a class where some handed in through an LMS (no
# exchange secret): the others' pages are released, theirs named in a warning.
if GRADER:
    c.ExchangeFactory.release_feedback = "grader.integrations.nbgrader.feedback.CourseReleaseFeedback"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<last_first>[^/_]+)_(?:LATE_)?(?P<student_id>\d+)_(?P<submission_id>\d+)_"
    r"(?P<file_id>[^/]+)$")

# Which edition's notebooks the course holds, which language the hints are in, and an
# export that counts a notebook's editions once.
if GRADER:
    from grader.integrations.nbgrader.editions import configure

    configure(c)
