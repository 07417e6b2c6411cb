"""Every command README.md shows is run, in order, in a temporary copy of the repository.

README shell blocks carry a marker comment right above them:

- ``<!-- readme-test: run -->``: each line is run with bash from the copy's root and must
  exit 0. Two commands are special: ``make lab`` (and ``jupyter lab``) open a server, so
  they are started, must serve JupyterLab (``/api/status`` answers) within the time limit,
  and are then stopped; ``make test`` runs the whole suite, which includes this file, so it
  runs with ``PYTEST_ADDOPTS`` narrowing pytest to ``tests/project/test_environment.py`` (the
  command, its set-up and pytest are real; the suite is not run twice).
- ``<!-- readme-test: run needs-grade -->``: as ``run``, the class grader's commands, run
  after all the ``run`` blocks, in the state they leave (``submitted/``).
- ``<!-- readme-test: output -->`` above a ``text`` block: sample output of the previous
  command. Each sample line must match the real stdout's lines in order (whitespace at the
  ends ignored); ``...`` inside a line matches anything, and a line of only ``...`` skips
  any number of lines.

Every ``sh``/``bash``/``console`` block must carry a ``run`` marker, so no command can be
shown unchecked. ``make`` installs with pip: the commands run in a virtual environment
(``--system-site-packages``, so nothing is downloaded but the build backend) first on
PATH, never touching the system's installation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from support import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README = ROOT / "README.md"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>\w*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)
MARKER = re.compile(r"<!--\s*readme-test:\s*(?P<kind>[\w -]+?)\s*-->\s*$")
SERVER = re.compile(r"^(make lab|(python3? -m )?jupyter lab)\b")
SHELL_LANGS = {"sh", "bash", "shell", "console"}


def blocks(readme: Path = README) -> list[tuple[str, str, str]]:
    """(marker kind or '', language, dedented body) of every fenced block, in order."""
    text = readme.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n ").splitlines()
        marker = MARKER.search(before[-1]) if before else None
        found.append((marker.group("kind") if marker else "", m.group("lang"),
                      textwrap.dedent(m.group("body"))))
    return found


def commands(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_every_shell_block_is_marked() -> None:
    found = blocks()
    assert found, "README.md has no code blocks"
    unmarked = [body for kind, lang, body in found if lang in SHELL_LANGS and not kind.startswith("run")]
    assert not unmarked, f"shell blocks without <!-- readme-test: run -->: {unmarked}"
    for i, (kind, lang, _) in enumerate(found):
        if kind == "output":
            assert lang == "text" and i > 0 and found[i - 1][0].startswith("run"), \
                "an output block must follow a run block"


def test_quick_start_is_exactly_make_lab_and_make_test() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):]
    first = next(b for k, lang, b in blocks() if lang in SHELL_LANGS and b in quick)
    assert [c.split("#")[0].strip() for c in commands(first)] == ["make lab", "make test"]


def match_output(sample: str, actual: str) -> None:
    want = [line.strip() for line in sample.strip("\n").splitlines()]
    have = [line.strip() for line in actual.splitlines()]

    def pattern(line: str) -> re.Pattern:
        return re.compile(".*".join(re.escape(part) for part in line.split("...")))

    def search(i: int, j: int) -> bool:  # want[i:] matches have[j:], with gaps at "..."
        if i == len(want):
            return True
        if want[i] == "...":
            return any(search(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and bool(pattern(want[i]).fullmatch(have[j])) and search(i + 1, j + 1)

    assert any(search(0, j) for j in range(len(have) + 1)), \
        f"README sample output does not match the real output.\n--- sample:\n{sample}\n--- real:\n{actual}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(command: str, cwd: Path, env: dict[str, str], config: Path, timeout: float = 600) -> str:
    """Start a command that opens JupyterLab; return once it serves, then stop it."""
    port = _free_port()
    (config / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "ip": "127.0.0.1", "port": port, "port_retries": 0, "open_browser": False,
        "allow_root": True}}))
    log = cwd / f".serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env={**env, "BROWSER": "true"},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                token = re.search(r"token=([0-9a-f]+)", log.read_text())
                if token:
                    try:
                        url = f"http://127.0.0.1:{port}/api/status?token={token.group(1)}"
                        with urllib.request.urlopen(url, timeout=2) as r:
                            if r.status == 200:
                                page = urllib.request.urlopen(
                                    f"http://127.0.0.1:{port}/lab?token={token.group(1)}", timeout=10)
                                assert "JupyterLab" in page.read().decode()
                                return log.read_text()
                    except OSError:
                        pass
                time.sleep(0.5)
            raise AssertionError(f"{command!r} did not serve JupyterLab on port {port} "
                                 f"(exit {proc.poll()}):\n{log.read_text()[-4000:]}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory) -> dict:
    """The ``run`` blocks, in order, in a fresh copy of the repository: the copy, its
    environment and the commands run. Both tests below start from it, whichever runs first."""
    tmp_path = tmp_path_factory.mktemp("readme")
    copy = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    config = tmp_path / "jupyter-config"
    config.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(venv),
               PYTHONPATH=str(copy), JUPYTER_CONFIG_DIR=str(config), MPLBACKEND="Agg",
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"))

    ran, last_output = [], None
    for kind, _lang, body in blocks():
        if kind == "output" and last_output is not None:
            match_output(body, last_output)
            continue
        if kind != "run":
            last_output = None  # a needs-grade block: its sample output is checked later
            continue
        for command in commands(body):
            last_output = run(command, copy, env, config)
            ran.append(command)
    return {"copy": copy, "env": env, "config": config, "ran": ran}


def test_readme_commands_run(readme_run) -> None:
    ran = readme_run["ran"]
    assert "make lab" in ran[0] and "make test" in ran[1]
    print(f"ran {len(ran)} README commands:", *ran, sep="\n  ")


def run(command: str, copy: Path, env: dict[str, str], config: Path) -> str:
    if SERVER.match(command):
        return serve(command, copy, env, config)
    run_env = dict(env)
    if command.startswith("make test"):
        run_env["PYTEST_ADDOPTS"] = "-q tests/project/test_environment.py"
    proc = subprocess.run(["bash", "-c", command], cwd=copy, env=run_env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, \
        f"README command failed: {command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_readme_class_grader_commands_run(readme_run) -> None:
    """The ``needs-grade`` blocks, in the state the ``run`` blocks left (``submitted/``)."""
    copy, env, config = readme_run["copy"], readme_run["env"], readme_run["config"]
    found = blocks()
    ran = []
    for i, (kind, _lang, body) in enumerate(found):
        if kind == "run needs-grade":
            out = ""
            for command in commands(body):
                out = run(command, copy, env, config)
                ran.append(command)
            if i + 1 < len(found) and found[i + 1][0] == "output":
                match_output(found[i + 1][2], out)
    assert ran
    assert (copy / "grading-out" / "grades.csv").is_file()


def test_output_matcher() -> None:
    real = "head\n  ✘ softmax   0.0 / 4.0\n      hint: x\n  total 0.0 / 10.0\n"
    match_output("✘ softmax   0.0 / 4.0\nhint: x", real)
    match_output("head\n...\ntotal ... / 10.0", real)
    for wrong in ("✘ softmax   1.0 / 4.0", "head\ntotal 0.0 / 10.0", "hint: y"):
        with pytest.raises(AssertionError):
            match_output(wrong, real)
