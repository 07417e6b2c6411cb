"""The grading engine (``grader.check.engine.grade_with_worker``) on top of the sandbox pool:
hostile notebooks earn nothing they did not compute, and cannot hurt the grader."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import hoarding, needs_bubblewrap

from grader.sandbox import Limits, SandboxPool

REPO = Path(__file__).resolve().parents[3]
LESSON = "01_attention_by_hand"
SOLUTION = REPO / "solutions" / LESSON / f"{LESSON}.ipynb"
STUDENT = REPO / "lessons" / LESSON / f"{LESSON}.ipynb"

pytestmark = [pytest.mark.sandbox, needs_bubblewrap()]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(jobs=2, limits=Limits(wall_s=30, memory_bytes=1 << 30)) as p:
        yield p


def grade(pool: SandboxPool, nb: dict[str, Any], **kwargs: Any) -> Any:
    from grader.check.engine import grade_with_worker

    return grade_with_worker(nb, LESSON, pool.start(limits=kwargs.get("limits")), **kwargs)


def with_cell(path: Path, source: str) -> dict[str, Any]:
    from grader.check.notebook import read_notebook

    nb = copy.deepcopy(read_notebook(path))
    nb["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "source": source,
            "outputs": [],
            "execution_count": None,
        }
    )
    return nb


def test_solution_full_marks_student_zero(pool: SandboxPool) -> None:
    from grader.check.notebook import read_notebook

    good = grade(pool, read_notebook(SOLUTION))
    blank = grade(pool, read_notebook(STUDENT))
    assert good.status == blank.status == "ok"
    assert good.score == good.max_score > 0
    assert blank.score == 0


@pytest.mark.parametrize(
    "hostile",
    [
        # patch the comparison functions: the trusted side compares with its own numpy
        "import numpy as np, torch\nnp.allclose = lambda *a, **k: True\n"
        "np.testing.assert_allclose = lambda *a, **k: None\ntorch.allclose = lambda *a, **k: True",
        # read the reference solutions or the hidden tests: they are not there
        f"src = open({str(SOLUTION)!r}).read()",
        f"import os; os.listdir({str(REPO / 'grader' / 'hidden')!r})",
    ],
)
def test_hostile_student_earns_nothing(pool: SandboxPool, hostile: str) -> None:
    report = grade(pool, with_cell(STUDENT, hostile))
    assert report.score == 0


def test_a_crash_loses_every_mark(pool: SandboxPool) -> None:
    """(Each hostile act is shown at the pool level in test_sandbox.py; two suffice here.)"""
    report = grade(pool, with_cell(SOLUTION, "import ctypes; ctypes.string_at(0)"),
                   limits=Limits(wall_s=20))
    assert report.status == "crashed"
    assert report.score == 0
    assert os.getpid() > 0  # and the grader is still here


def test_a_memory_bomb_is_reported_as_memory(pool: SandboxPool) -> None:
    """A cell that reaches the memory limit: the cgroup's OOM killer stops the submission,
    or (a memory rlimit) the worker ends itself at the MemoryError; zero either way."""
    hostile = "import numpy as np; x = np.ones(3 << 30, dtype=np.uint8); x[::4096] = 1"
    report = grade(pool, with_cell(SOLUTION, hostile), limits=Limits(wall_s=20,
                                                                       memory_bytes=1 << 30))
    assert report.status == "memory"
    assert report.score == 0


@pytest.mark.parametrize("garbage", [
    b"garbage \x00\xff not json",  # lengths beyond any message: refused as they are read
    b"\x00\x00\x01\x86\xa0" + bytes(15) + b"junk",  # lengths of a plausible message, then junk
])
def test_garbage_on_the_descriptors_is_named_and_ends_the_run_at_once(pool: SandboxPool,
                                                                     garbage: bytes) -> None:
    """Issue 49: a notebook writing garbage to every descriptor was reported as `timeout`
    ("ran out of time (an infinite loop…)") while its hints said "sent back something
    unreadable", and waited its whole wall clock when the garbage announced a long message."""
    import time

    from grader.results import STOPPED, Status

    hostile = ("import os\nfor fd in range(3, 256):\n    try:\n"
               f"        os.write(fd, {garbage!r})\n    except OSError:\n        pass\n")
    started = time.monotonic()
    report = grade(pool, with_cell(SOLUTION, hostile), limits=Limits(wall_s=30))
    assert time.monotonic() - started < 15, "waited for the garbage's made-up message"
    assert report.status == Status.GARBLED == "garbled" and report.score == 0
    assert report.message == str(STOPPED[Status.GARBLED])
    assert {str(h.text) for e in report.exercises for h in e.hints} == {
        "the notebook's process sent back something unreadable"}



@pytest.mark.parametrize("chunk", [
    "np.ones((8192, 8192))",  # numpy: MemoryError (an rlimit) or the OOM killer (a cgroup)
    "__import__('torch').ones(1 << 26, dtype=__import__('torch').float64)",  # torch's RuntimeError
])
def test_a_notebook_that_hoards_memory_gets_the_same_status_and_score_every_time(
        pool: SandboxPool, chunk: str) -> None:
    """512 MiB more at every call of softmax, under a 1 GiB limit: the check during which the
    limit is reached, and what the exercises before it earned, depend on the mechanism and
    the run; the verdict does not (memory, every exercise 0, with the same hint)."""
    limits = Limits(wall_s=30, memory_bytes=1 << 30)
    reports = [grade(pool, hoarding(SOLUTION, chunk), limits=limits) for _ in range(2)]
    for report in reports:
        assert report.status == "memory", report.message
        assert report.score == 0 and report.message == "The notebook ran out of memory."
        assert {r.name for r in report.exercises} == {"dot_scores", "softmax", "attention"}
        assert all("reached its memory limit (1 GiB)" in str(r.failures[0].text) for r in report.exercises)
    assert [r.as_dict() for r in reports[0:1]] == [r.as_dict() for r in reports[1:2]]
