"""The commands (issue 53, items 6 and 7): ``-v`` / ``--log-level`` on every command of
``python -m grader`` and ``python -m grader.authoring`` (the standard ``logging`` module,
``grader.common.logs``), the helper's log and ``errors.log`` written through it, every variable
the grader reads read in ``coursekit.settings``, the ``grader`` console script, the
authoring tools as one command, and the limits' defaults read from ``Limits`` only."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT

from coursekit import settings
from coursekit.errors import UserError
from grader import cli
from grader.common import logs
from grader.common.limits import DEFAULT_LIMITS, Limits

#: Each command of ``python -m grader`` with the arguments it requires.
REQUIRED = {
    "check": ["nb.ipynb"], "helper": ["status"],
    "grade": ["submitted", "--lesson", "01", "--out", "out"], "gradebook": [],
    "return-feedback": ["out"], "selftest": [], "deadlines": [], "release": ["handout"],
    "gradescope": ["01", "out"], "lms": ["out", "--roster", "r.csv", "--to", "canvas"],
    "report": ["out"],
}
AUTHORING = ("generate", "editions", "i18n")


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The ``grader`` logger and ``$GRADER_LOG_LEVEL`` as they were, after the test."""
    for name in (settings.LOG_LEVEL, settings.DEBUG):
        monkeypatch.setenv(name, "")  # so that the end puts back what was there, or nothing
        monkeypatch.delenv(name)
    logger = logging.getLogger(logs.ROOT)
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def _grader(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)


def test_every_command_takes_the_log_options_before_or_after_its_name() -> None:
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(REQUIRED), "a new command: add its arguments here"
    for name, required in REQUIRED.items():
        line = [name, *required]
        assert parser.parse_args(line).log_level is None, name
        assert parser.parse_args([*line, "-v"]).log_level == "debug", name
        assert parser.parse_args([*line, "--verbose"]).log_level == "debug", name
        assert parser.parse_args(["--log-level", "INFO", *line]).log_level == "info", name
        assert parser.parse_args(["-v", *line, "--log-level=error"]).log_level == "error", name
        assert parser.parse_args(["--log-level", "info", *line]).log_level == "info", name


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_a_debug_line_with_v_and_none_without(name: str, fresh_log: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for attr in [a for a in vars(cli) if a.startswith("cmd_")]:
        monkeypatch.setattr(cli, attr, lambda args: 0)  # the commands' work is not tested here
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    assert cli.main([name, *REQUIRED[name]]) == 0
    assert out.getvalue() == ""
    assert cli.main([name, *REQUIRED[name], "-v"]) == 0
    assert f"grader DEBUG: python -m grader {name}: " in out.getvalue()
    assert os.environ[settings.LOG_LEVEL] == "debug"  # for the processes it starts


def test_a_bad_level_is_a_usage_error(fresh_log: None) -> None:
    proc = _grader("report", "nowhere", "--log-level", "loud")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "error: argument --log-level: invalid choice: 'loud'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage: python -m grader report")


def test_the_log_goes_to_stderr_at_the_level_asked() -> None:
    quiet, loud = _grader("report", "nowhere"), _grader("-v", "report", "nowhere")
    assert quiet.returncode == loud.returncode == 2  # a user's error: no such folder
    assert "DEBUG" not in quiet.stderr and quiet.stdout == loud.stdout == ""
    assert "grader DEBUG: python -m grader report: {'command': 'report'" in loud.stderr
    env = dict(os.environ, GRADER_DEBUG="1")
    assert "grader DEBUG: python -m grader report" in _grader("report", "x", env=env).stderr


@pytest.mark.parametrize("tool", AUTHORING)
def test_the_authoring_tools_take_the_log_options(tool: str, capsys: pytest.CaptureFixture,
                                                  fresh_log: None) -> None:
    from grader.authoring.__main__ import main

    for line in ([tool, "--log-level", "loud"], ["--log-level", "loud", tool]):
        with pytest.raises(SystemExit) as stopped:
            main(line)
        assert stopped.value.code == 2
        assert "invalid choice: 'loud'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main([tool, "--help"])
    assert stopped.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith(f"usage: python -m grader.authoring {tool}")
    assert "--log-level LEVEL" in help_text and "-v, --verbose" in help_text


def test_one_authoring_command_runs_each_tool() -> None:
    """``-v`` before or after the tool's name; the old module entry points still run."""
    ways = [["-m", "grader.authoring", "-v", "i18n", "status"],
            ["-m", "grader.authoring", "i18n", "status", "-v"],
            ["-m", "grader.i18n", "status", "-v"]]
    outputs = set()
    for way in ways:
        proc = subprocess.run([sys.executable, *way], capture_output=True, text=True,
                              timeout=300, cwd=ROOT)
        assert proc.returncode in (0, 1), proc.stderr  # 1: translations missing
        assert re.search(r"grader DEBUG: python -m grader\.authoring i18n: .*'command': "
                         r"'status'", proc.stderr), proc.stderr
        outputs.add(proc.stdout)
    assert len(outputs) == 1 and "messages translated" in outputs.pop()
    proc = subprocess.run([sys.executable, "-m", "grader.authoring", "i18n", "status"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "DEBUG" not in proc.stderr


def test_the_makefile_runs_the_authoring_tools_through_the_one_command() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target, tool in (("lessons", "generate"), ("editions", "editions"),
                         ("translations", "i18n")):
        body = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert body and f"-m grader.authoring {tool}" in body.group(1), target


def test_the_level_comes_from_the_options_then_the_environment(
        fresh_log: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert logs.level() == logging.WARNING
    monkeypatch.setenv(settings.DEBUG, "0")
    assert logs.level() == logging.WARNING
    monkeypatch.setenv(settings.DEBUG, "1")
    assert logs.level() == logging.DEBUG
    monkeypatch.setenv(settings.LOG_LEVEL, "error")
    assert logs.level() == logging.ERROR and logs.level("info") == logging.INFO
    monkeypatch.setenv(settings.LOG_LEVEL, "loud")
    with pytest.raises(UserError, match="GRADER_LOG_LEVEL must be one of"):
        logs.level()
    proc = _grader("report", "nowhere", env=dict(os.environ, GRADER_LOG_LEVEL="loud"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == ("grader report: GRADER_LOG_LEVEL must be one of debug, info, warning, "
                           "error, critical, got 'loud'\n")


def test_a_hidden_tests_own_error_is_logged_with_its_traceback(
        fresh_log: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """At debug; as a warning under GRADER_DEBUG, which stderr shows with no log set up."""
    from grader.check import runner

    try:
        raise KeyError("oracle")
    except KeyError as exc:
        error = exc
    with caplog.at_level(logging.DEBUG, logger="grader"):
        runner._grader_bug("softmax", error)
        monkeypatch.setenv(settings.DEBUG, "1")
        runner._grader_bug("softmax", error)
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.WARNING]
    assert all(r.exc_info and r.exc_info[1] is error for r in caplog.records)
    assert "softmax: the hidden test's own error" in caplog.records[0].getMessage()


def test_errors_log_reads_as_it_always_did(tmp_path: Path, fresh_log: None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--- <time> <student> (attempt N)``, then the traceback: through the log, which
    shows it on stderr at info (and not at the default level)."""
    from grader.classgrade.classroom import _log_error

    try:
        raise RuntimeError("the oracle broke")
    except RuntimeError as exc:
        error = exc
    stderr = io.StringIO()
    logs.configure(stream=stderr)
    _log_error(tmp_path, "alice", 0, error)
    logs.configure("info", stream=stderr)
    _log_error(tmp_path, "bob", 1, error)
    text = (tmp_path / "errors.log").read_text(encoding="utf-8")
    stamps = re.findall(r"^--- (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ", text, re.M)
    tb = "".join(traceback.format_exception(error))
    assert text == (f"--- {stamps[0]} alice (attempt 1)\n{tb}"
                    f"--- {stamps[1]} bob (attempt 2)\n{tb}")
    assert "alice" not in stderr.getvalue()
    assert "bob (attempt 2)" in stderr.getvalue() and "the oracle broke" in stderr.getvalue()


def test_the_helpers_log_reads_as_it_always_did(tmp_path: Path, fresh_log: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper's lines (its stderr is the log file) and a client's, in one file."""
    from grader.helper import client, private

    log = tmp_path / "check.log"
    monkeypatch.setattr(client, "paths", lambda: private.Paths(tmp_path / "s", tmp_path / "l", log))
    stream = io.StringIO()
    logs.configure(stream=stream, fmt=logs.HELPER)
    logging.getLogger("grader.helper").setLevel(logging.INFO)
    try:
        private.log("listening on s")
        private.log("a check's trusted process sent nothing", logging.WARNING)
        logging.getLogger("grader.check.engine").info("not the helper's own line")
    finally:
        logging.getLogger("grader.helper").setLevel(logging.NOTSET)
    client._note("check without the helper: OSError: no")
    stamp, pid = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", os.getpid()
    assert re.fullmatch(rf"{stamp} \[helper {pid}\] listening on s\n"
                        rf"{stamp} \[helper {pid}\] a check's trusted process sent nothing\n",
                        stream.getvalue()), stream.getvalue()
    assert re.fullmatch(rf"{stamp} \[client {pid}\] check without the helper: OSError: no\n",
                        log.read_text(encoding="utf-8"))


def test_a_warm_check_imports_no_logging() -> None:
    """The helper's client logs only when something goes wrong (``logging`` costs a warm
    check's client milliseconds)."""
    code = ("import sys, grader.helper.client, grader.runtime.wire; "
            "print('logging' in sys.modules, 'dataclasses' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.stdout.split() == ["False", "False"], proc.stderr



def _imported_by(code: str, names: tuple[str, ...], env: dict[str, str] | None = None) -> list[str]:
    """Which of ``names`` a fresh ``python -S`` (no site hooks: the modules a machine's
    ``.pth`` files import are not there to hide ours) has imported after ``code``."""
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); {code}; "
              f"print(' '.join(m for m in {names!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_a_warm_check_imports_only_what_asking_needs() -> None:
    """A warm check's client, up to its request (no helper answers here: it finds none),
    imports neither pathlib nor tempfile (a private runtime folder serves), nor the full
    command line, the messages, logging, Babel, numpy or torch: its imports are most of a
    warm check's start."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="run-") as name:  # a short path
        runtime = Path(name)
        env = {k: v for k, v in os.environ.items() if k != "CI"} | {
            "XDG_RUNTIME_DIR": str(runtime), settings.CHECK_HELPER: "15"}
        code = ("import grader.__main__; from grader.helper.client import quick_check; "
                "assert quick_check(['check', 'missing.ipynb']) is None")
        heavy = ("pathlib", "tempfile", "logging", "dataclasses", "argparse", "grader.cli",
                 "grader.i18n", "babel", "numpy", "torch")
        if any(importlib.util.find_spec(m) for m in ("_sha2", "_sha256")):  # CPython's own
            heavy += ("hashlib",)
        assert _imported_by(code, heavy, env) == []
        assert (runtime / "attention-course").is_dir()  # it did look for a helper there


def test_the_helpers_keys_are_sha256_without_hashlib() -> None:
    """The client's sha256 (CPython's own module, not hashlib's OpenSSL) is hashlib's: the
    same socket for the same course, the same fingerprint for the same code."""
    import hashlib

    from grader.helper import private

    for data in (b"", b"attention \xe4\xbc\x98\xe7\xa7\x80" * 100):
        assert private.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


def test_the_command_line_imports_no_babel_torch_numpy_or_datetime() -> None:
    """``import grader.cli`` (every cold command): the catalogues' Babel and ``datetime``
    (only writing a .po needs it) and the graders' numpy and torch come where they are used."""
    assert _imported_by("import grader.cli", ("babel", "numpy", "torch", "datetime")) == []

# -- the environment: read in coursekit.settings only -------------------------------------

#: Variables read elsewhere only to be passed on to a process the grader starts, or put back.
PASSED_ON = {"PYTHONPATH", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}


def environment_reads(source: str) -> list[str]:
    """The variables ``source`` reads by name: ``os.environ.get(NAME)``, ``os.getenv(NAME)``,
    ``os.environ[NAME]`` (not assigned), ``NAME in os.environ``; ``*`` where it reads them
    all (``os.environ.items()``, ``for k in os.environ``), not to copy them whole for a
    process it starts (``dict(os.environ, ...)``)."""
    def environ(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ"
                and isinstance(node.value, ast.Name) and node.value.id == "os")

    def name(node: ast.expr) -> str:
        return node.value if isinstance(node, ast.Constant) else ast.unparse(node)

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr == "get" and environ(func.value)) or (
                    func.attr == "getenv" and isinstance(func.value, ast.Name)
                    and func.value.id == "os"):
                found.append(name(node.args[0]))
        elif isinstance(node, ast.Subscript) and environ(node.value) and isinstance(
                node.ctx, ast.Load):
            found.append(name(node.slice))
        elif isinstance(node, ast.Compare) and any(environ(c) for c in node.comparators):
            found.append(name(node.left))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("items", "keys", "values") and environ(node.func.value)) \
                or (isinstance(node, ast.For | ast.comprehension) and environ(node.iter)):
            found.append("*")
    return found


def test_environment_reads_are_found() -> None:
    source = ('import os\nx = os.environ.get("A", "")\ny = os.getenv(B)\nz = os.environ["C"]\n'
              'os.environ["D"] = "1"\nif "E" in os.environ: pass\n'
              'env = dict(os.environ, F="1")\n'
              'mine = {k: v for k, v in os.environ.items() if k.startswith("G")}\n'
              'for k in [k for k in os.environ if k.startswith("H")]: pass\n')
    assert environment_reads(source) == ["A", "B", "C", "E", "*", "*"]


def test_the_grader_reads_the_environment_in_coursekit_settings_only() -> None:
    settings_file = ROOT / "coursekit" / "settings.py"
    read_elsewhere = {}
    for folder in ("grader", "coursekit"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == settings_file or "reference" in path.relative_to(ROOT).parts:
                continue
            names = set(environment_reads(path.read_text(encoding="utf-8"))) - PASSED_ON
            if names:
                read_elsewhere[str(path.relative_to(ROOT))] = sorted(names)
    assert read_elsewhere == {}, "read them through coursekit.settings (and list them there)"
    doc = settings.__doc__ or ""
    for variable in set(environment_reads(settings_file.read_text(encoding="utf-8"))) - {"*"}:
        constant = getattr(settings, variable, variable)
        assert f"``{constant}``" in doc, f"{constant}: say in settings' docstring what it means"


# -- the limits' defaults: Limits only ----------------------------------------------------

def test_the_commands_take_their_limits_defaults_from_limits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.check import command

    other = Limits(wall_s=77.0, call_s=7.0, memory_bytes=3 << 30)
    monkeypatch.setattr(cli, "DEFAULT_LIMITS", other)
    monkeypatch.setattr(command, "DEFAULT_LIMITS", other)
    command.parser.cache_clear()
    parser = cli.build_parser()
    for name in ("grade", "gradescope"):
        args = parser.parse_args([name, *REQUIRED[name]])
        assert (args.timeout, args.memory) == (77.0, 3.0), name
    assert parser.parse_args(["grade", *REQUIRED["grade"]]).call_timeout == 7.0
    assert parser.parse_args(["check", "nb.ipynb"]).timeout == 77.0
    command.parser.cache_clear()


def test_no_other_module_writes_a_limits_default_again() -> None:
    """Gradescope's package and its autograder.json default to ``Limits``' values, and the
    check helper's client (which does not import ``grader.common.limits``) keeps its copy equal."""
    from grader.helper.client import DEFAULT_TIMEOUT_S

    assert DEFAULT_TIMEOUT_S == DEFAULT_LIMITS.wall_s
    for rel in ("grader/integrations/gradescope/package.py", "grader/integrations/gradescope/run.py",
                "grader/cli.py", "grader/check/command.py"):
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.expr | None]] = []
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                pairs.append((node.target.id, node.value))
            elif isinstance(node, ast.arguments):
                named = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
                pairs += zip([a.arg for a in named],
                             node.defaults + node.kw_defaults, strict=False)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value in ("--timeout", "--memory", "--call-timeout"):
                pairs += [(str(node.args[0].value), k.value) for k in node.keywords
                          if k.arg == "default"]
            for name, value in pairs:
                if re.search(r"timeout|memory", name):
                    assert not isinstance(value, ast.Constant) or value.value is None, \
                        f"{rel}:{getattr(value, 'lineno', '?')}: {name}'s default: read it from Limits"


# -- cmd_grade: its command line apart from the run ---------------------------------------

def test_grade_options_read_the_command_line_alone(tmp_path: Path, capsys) -> None:
    lesson = "01_attention_by_hand"
    (tmp_path / "submitted" / "alice" / lesson).mkdir(parents=True)
    args = cli.build_parser().parse_args(
        ["grade", str(tmp_path / "submitted"), "--lesson", "1", "--out", str(tmp_path / "out"),
         "--timeout", "30", "--memory", "0.5", "--call-timeout", "3", "--require",
         "memory-cap, no-network", "--student", "alice", "--deadlines", "none"])
    submitted, opts = cli.grade_options(args)
    assert submitted == tmp_path / "submitted" and opts.lesson == lesson
    assert opts.limits == DEFAULT_LIMITS.with_(wall_s=30.0, call_s=3.0, memory_bytes=1 << 29)
    assert opts.require == ("memory-cap", "no-network") and opts.students == ("alice",)
    assert opts.deadlines is None and capsys.readouterr().err == ""
    args.deadlines = None  # none found near SUBMITTED: said, and graded without penalties
    assert cli.grade_options(args)[1].deadlines is None
    assert "no deadlines.toml" in capsys.readouterr().err
    args.require = "memory-cap,telepathy"
    with pytest.raises(cli.UserError, match="unknown protection"):
        cli.grade_options(args)
    assert not (tmp_path / "out").exists()  # nothing graded, nothing written


# -- the console script -------------------------------------------------------------------

def test_the_project_declares_the_grader_command() -> None:
    """What pip installs the script from (``[project.scripts]``), a function that exists."""
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"grader": "grader.__main__:main"}
    module, _, function = scripts["grader"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def _copy_of_the_project(where: Path) -> Path:
    copy = where / "course"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, copy / name)
    for package in ("grader", "coursekit"):
        shutil.copytree(ROOT / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _purelib(python: Path | str) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.e2e
def test_pip_install_e_puts_the_grader_command_on_the_path(tmp_path: Path) -> None:
    """``pip install -e .`` in a fresh venv (built with the base Python's setuptools,
    nothing downloaded; this environment's packages seen through a ``.pth`` once it is
    installed) puts ``grader`` on its PATH, which is ``python -m grader``."""
    copy = _copy_of_the_project(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--system-site-packages",
                    "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    builds = subprocess.run([str(python), "-c", "import setuptools, importlib.util as u; "
                             "assert u.find_spec('wheel') or u.find_spec("
                             "'setuptools.command.bdist_wheel')"], capture_output=True, env=env)
    if builds.returncode:
        pytest.skip("the base Python has no setuptools that builds wheels, and nothing may "
                    "be downloaded (the entry point is checked above)")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-index", "--no-build-isolation", "--no-deps", "-e", str(copy)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    Path(_purelib(python), "_course_deps.pth").write_text(_purelib(sys.executable) + "\n")
    script = venv / "bin" / "grader"
    where = subprocess.run([str(script), "-v", "report", "nowhere"], capture_output=True,
                           text=True, timeout=300, env=env, cwd=tmp_path)
    assert where.returncode == 2 and "grader report: cannot read nowhere/grades.csv" in where.stderr
    assert "grader DEBUG: grader report: " in where.stderr  # its usage says `grader`
    helped = subprocess.run([str(script), "check", "--help"], capture_output=True, text=True,
                            timeout=300, env=env, cwd=tmp_path)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: grader check")
    imported = subprocess.run([str(python), "-c", "import grader; print(grader.__file__)"],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert imported.stdout.strip() == str(copy / "grader" / "__init__.py")


# -- every parser of every command takes the log options ----------------------------------

#: Each command line the grader reads, by the function that parses it (called with no
#: arguments, its parser is caught before it reads them): the grader, its authoring command
#: and each of its tools (they run alone too), and the check helper's process.
COMMAND_MAINS = {"grader.cli": "main", "grader.authoring.__main__": "main",
                 "grader.authoring.generate": "main", "grader.authoring.editions": "main",
                 "grader.i18n": "main", "grader.helper.server": "main"}
#: The other modules that build a parser: ``check``'s (in ``grader.cli``'s tree, shared with
#: the check helper) and the sandboxed worker's, not a command: it runs beside the student's
#: code and imports the runtime only (its stderr is the student's output).
OTHER_PARSERS = {"grader.check.command", "grader.runtime.worker"}


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__(parser.prog)
        self.parser = parser


def parser_of(module: str, function: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser ``module.function([])`` builds, caught when it parses."""
    def caught(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", caught)
        with pytest.raises(_Parsed) as parsed:
            getattr(importlib.import_module(module), function)([])
    return parsed.value.parser


def without_log_options(parser: argparse.ArgumentParser) -> list[str]:
    """The ``prog`` of each parser in ``parser``'s tree (its commands', theirs, ...) that lacks
    ``--log-level`` or ``-v``."""
    options = {o for action in parser._actions for o in action.option_strings}
    lacking = [] if {"--log-level", "-v"} <= options else [parser.prog]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):
                lacking += without_log_options(command)
    return lacking


def test_a_parser_without_the_log_options_is_found() -> None:
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers()
    commands.add_parser("one", prog="tool one")
    commands.add_parser("two", prog="tool two").add_subparsers().add_parser("deep", prog="tool two deep")
    assert without_log_options(parser) == ["tool", "tool one", "tool two", "tool two deep"]
    logs.add_options(parser)
    assert without_log_options(parser) == []


def test_every_parser_of_every_command_takes_the_log_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walked through the tree of each command line (a command's commands too: ``editions
    sync``, ``helper serve``); a module that builds a parser is one of them or says why not."""
    building = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                for path in (ROOT / "grader").rglob("*.py")
                if "ArgumentParser(" in path.read_text(encoding="utf-8")}
    assert building - OTHER_PARSERS == set(COMMAND_MAINS), \
        "a new command line: add it to COMMAND_MAINS"
    lacking = [prog for module, function in COMMAND_MAINS.items()
               for prog in without_log_options(parser_of(module, function, monkeypatch))]
    assert lacking == []


#: A number said as a default in a text: "default: 20", "the grader's 20".
SAID_DEFAULT = re.compile(r"(?:grader's|default:?|defaults? to|by default)\W{0,3}(\d+(?:\.\d+)?)\b", re.I)


def defaults_written_as_numbers(source: str, values: set[float]) -> list[str]:
    """``line: text`` for each string of ``source`` (a docstring, a help text) that says one
    of ``values`` as a default in figures (it would go on saying so after ``Limits`` changed)."""
    return [f"{node.lineno}: {match.group(0)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            for match in SAID_DEFAULT.finditer(node.value) if float(match.group(1)) in values]


def test_no_text_says_a_limits_default_in_figures() -> None:
    """Help texts and docstrings name ``Limits``' defaults by reading them (the CLI's help and
    nbgrader's configuration say ``DEFAULT_LIMITS.call_s``), never as a number of their own."""
    values = {float(v) for v in vars(DEFAULT_LIMITS).values() if isinstance(v, int | float)}
    assert defaults_written_as_numbers('h = "a call (default: $X, else the grader\'s 20)"\n'
                                       '"""Idle minutes (default 15)."""\n', values) == [
        "1: grader's 20"]
    found = {}
    for path in sorted([*(ROOT / "grader").rglob("*.py"), *(ROOT / "coursekit").rglob("*.py")]):
        if path != ROOT / "grader" / "common" / "limits.py" and "reference" not in path.parts:
            said = defaults_written_as_numbers(path.read_text(encoding="utf-8"), values)
            if said:
                found[path.relative_to(ROOT).as_posix()] = said
    assert found == {}
