"""``grader check``'s warm helper (grader/helper/): the same verdicts as a cold check,
nothing of one check reaching the next, a private socket, idle exit, ``off``, fallback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support import ROOT, helper_env, lesson_path, solution_path

pytestmark = [pytest.mark.sandbox, pytest.mark.e2e, pytest.mark.slow]

LESSON = "01_attention_by_hand"


def _run(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def _check(env: dict[str, str], path: Path, *extra: str) -> dict:
    proc = _run(env, "check", str(path), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _points(result: dict) -> dict[str, float]:
    return {e["name"]: e["points"] for e in result["exercises"]}


def _status(env: dict[str, str]) -> dict[str, str]:
    proc = _run(env, "helper", "status", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)


def _folder(tmp: Path) -> Path:
    return tmp / f"attention-course-{os.getuid()}"


def _lesson01(tmp: Path, name: str, edit=None) -> Path:
    nb = json.loads(solution_path(LESSON).read_text(encoding="utf-8"))
    if edit:
        edit(nb)
    folder = tmp / name
    folder.mkdir()
    path = folder / f"{LESSON}.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _code(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def _without(grade_id: str):
    def edit(nb: dict) -> None:
        nb["cells"] = [c for c in nb["cells"]
                       if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != grade_id]
    return edit


@pytest.fixture(scope="module")
def helper():
    """A helper of its own (a private temporary folder), stopped at the end."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="helper-") as name:
        tmp = Path(name)
        env = helper_env(tmp, "10")
        assert _run(env, "helper", "start", timeout=240).returncode == 0
        yield env, tmp
        _run(env, "helper", "stop", timeout=60)


def test_the_first_check_runs_cold_and_starts_the_helper_for_the_next(short_tmp) -> None:
    """No helper runs: the check answers in fresh processes (sooner than a helper that
    starts), then leaves one starting for the checks after it, which it answers."""
    env = helper_env(short_tmp, "10")
    try:
        first = _check(env, solution_path(LESSON))
        assert first["score"] == first["max_score"] > 0
        assert _run(env, "helper", "start", timeout=240).returncode == 0  # waits till it is warm
        status = _status(env)
        assert status["ready"] == "True" and status["checks"] == "0"  # it answered no check
        assert _check(env, solution_path(LESSON)) == first
        assert _status(env)["checks"] == "1"
        log = next(_folder(short_tmp).glob("*.log")).read_text()
        assert log.count("listening on") == 1 and "check without the helper" not in log
    finally:
        _run(env, "helper", "stop", timeout=60)


def test_helper_start_says_when_helpers_are_off(short_tmp) -> None:
    proc = _run(helper_env(short_tmp, "off"), "helper", "start", timeout=60)
    assert proc.returncode == 2 and "off here" in proc.stderr
    assert not list(short_tmp.glob("attention-course-*/*.sock"))


def test_helper_answers_as_a_cold_check_would(helper) -> None:
    env, tmp = helper
    first = _check(env, solution_path(LESSON))
    assert first["score"] == first["max_score"] > 0
    status = _status(env)
    assert status["ready"] == "True" and int(status["checks"]) >= 1
    again = _check(env, solution_path(LESSON))
    assert again == first
    assert int(_status(env)["checks"]) == int(status["checks"]) + 1
    untouched = _check(env, lesson_path(LESSON))
    cold = _check(dict(env, COURSE_CHECK_HELPER="off"), lesson_path(LESSON))
    assert untouched == cold and untouched["score"] == 0
    text = _run(env, "check", str(lesson_path(LESSON)))
    assert text.returncode == 0 and "hint: `softmax` is not implemented yet" in text.stdout


def test_socket_is_private(helper) -> None:
    env, tmp = helper
    _check(env, solution_path(LESSON))
    folder = _folder(tmp)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert folder.stat().st_uid == os.getuid()
    sockets = list(folder.glob("*.sock"))
    assert len(sockets) == 1 and stat.S_ISSOCK(sockets[0].stat().st_mode)
    assert not stat.S_IMODE(sockets[0].stat().st_mode) & 0o077


def test_no_state_reaches_the_next_check(helper) -> None:
    """A notebook that patches numpy, builtins, the course's modules and the interpreter's
    modules, then a notebook that needs none of it: the second is graded as if alone."""
    env, tmp = helper
    patch = (
        "import builtins, sys, numpy as np\n"
        "import coursekit\n"
        "builtins.softmax = softmax\n"       # a missing `softmax` would find this one
        "builtins.dot_scores = dot_scores\n"
        "np.exp = lambda x: x * 0\n"          # every later softmax would be wrong
        "np.random.seed(0)\n"
        "coursekit.PATCHED = True\n"
        "sys.modules['grader'] = None\n"
    )

    def poison(nb: dict) -> None:
        nb["cells"].append(_code(patch))
    poisoned = _check(env, _lesson01(tmp, "poisoned", poison))
    by_name = {e["name"]: e for e in poisoned["exercises"]}
    assert not by_name["softmax"]["passed"]  # the patched np.exp took effect, in this check
    without = _lesson01(tmp, "missing", _without("softmax"))
    missing = _check(env, without)
    by_name = {e["name"]: e for e in missing["exercises"]}
    assert by_name["softmax"]["points"] == 0 and "not defined" in by_name["softmax"]["message"]
    assert by_name["dot_scores"]["passed"]
    assert _points(missing) == _points(_check(dict(env, COURSE_CHECK_HELPER="off"), without))

    reveal = _code(
        "import builtins, numpy as np, coursekit\n"
        "if (hasattr(builtins, 'dot_scores') or hasattr(coursekit, 'PATCHED')\n"
        "        or np.exp(np.zeros(1))[0] != 1.0):\n"
        "    del softmax\n")
    clean = _check(env, _lesson01(tmp, "clean", lambda nb: nb["cells"].append(reveal)))
    assert clean["score"] == clean["max_score"], clean  # nothing of the poisoned check leaked
    # the same cell does notice a leak where there is one (in its own notebook)
    control = _check(env, _lesson01(tmp, "control", lambda nb: nb["cells"].extend(
        [_code("import coursekit\ncoursekit.PATCHED = True"), reveal])))
    assert {e["name"]: e["passed"] for e in control["exercises"]}["softmax"] is False


def test_hostile_notebooks_through_the_helper(helper) -> None:
    env, tmp = helper

    def loop(nb: dict) -> None:
        nb["cells"].append(_code("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "while True:\n    pass"))
    result = _check(env, _lesson01(tmp, "loop", loop), "--timeout", "3")
    assert result["score"] == 0 and "took too long" in result["exercises"][0]["message"]

    def exits(nb: dict) -> None:
        nb["cells"].append(_code("import os\nos._exit(3)"))
    result = _check(env, _lesson01(tmp, "exits", exits))
    assert result["score"] == 0 and "stopped" in result["exercises"][0]["message"]
    # the helper survives both, and grades the next one in full
    after = _check(env, solution_path(LESSON))
    assert after["score"] == after["max_score"]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_each_check_runs_in_a_process_forked_ahead_of_it(helper) -> None:
    """Between checks the trusted zygote holds one trusted process forked ahead; a check
    takes it (and it ends with the check), and the next is forked once the check is over."""
    env, tmp = helper
    _check(env, solution_path(LESSON))
    helper_pid = int(_status(env)["pid"])
    zygote = next(c for c in _children(helper_pid) if _cmdline(c) == _cmdline(helper_pid))

    def ahead() -> set[int]:
        """The zygote's children once they have stayed the same for half a second (the
        last check's process gone, the next one forked)."""
        deadline = time.monotonic() + 30
        found, since = _children(zygote), time.monotonic()
        while time.monotonic() < deadline and (not found or time.monotonic() - since < 0.5):
            time.sleep(0.05)
            now = _children(zygote)
            if now != found:
                found, since = now, time.monotonic()
        return found

    first = ahead()
    assert len(first) == 1
    _check(env, solution_path(LESSON))
    second = ahead()
    assert len(second) == 1 and not second & first  # the first one ran the check, and ended


def test_two_checks_at_once(helper) -> None:
    env, tmp = helper
    procs = [subprocess.Popen([sys.executable, "-m", "grader", "check", str(path), "--format", "json"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for path in (solution_path(LESSON), lesson_path(LESSON))]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    full, zero = (json.loads(out) for out, _ in outs)
    assert full["score"] == full["max_score"] and zero["score"] == 0


@pytest.fixture
def short_tmp():
    """A temporary folder with a short path (a socket's path holds 108 bytes at most)."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="helper-") as tmp:
        yield Path(tmp)


def test_off_never_starts_a_helper(short_tmp) -> None:
    tmp_path = short_tmp
    env = helper_env(tmp_path, "off")
    result = _check(env, solution_path(LESSON))
    assert result["score"] == result["max_score"]
    assert not list(tmp_path.glob("attention-course-*/*.sock"))
    assert "no check helper" in _run(env, "helper", "status", timeout=60).stdout


def test_unsafe_folder_falls_back_to_a_cold_check(short_tmp) -> None:
    tmp_path = short_tmp
    folder = _folder(tmp_path)
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # others may enter: the helper must not put its socket there
    env = helper_env(tmp_path, "10")
    result = _check(env, solution_path(LESSON))
    assert result["score"] == result["max_score"]
    assert not list(folder.glob("*.sock"))
    started = time.monotonic()
    proc = _run(env, "helper", "start", timeout=60)  # says why at once, never waits for one
    assert proc.returncode == 2 and time.monotonic() - started < 30, proc.stderr
    assert not list(folder.glob("*.sock"))


def test_idle_helper_stops_by_itself(short_tmp) -> None:
    tmp_path = short_tmp
    env = helper_env(tmp_path, "0.05")  # 3 seconds
    _check(env, solution_path(LESSON))
    log = next(_folder(tmp_path).glob("*.log"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "stopped after" not in log.read_text():
        time.sleep(0.5)
    assert "idle for" in log.read_text() and "stopped after 0 check(s)" in log.read_text()
    assert not list(_folder(tmp_path).glob("*.sock"))
    assert "no check helper" in _run(env, "helper", "status", timeout=60).stdout
