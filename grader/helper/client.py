"""``grader check``'s side of the warm helper: ask the helper of this user and copy of the
course and print its answer; None when none runs or it cannot answer, and the check runs
the cold way. When none ran, :func:`start` then starts one, without waiting for it, for the
checks after this one: a cold check answers sooner than a helper that starts (both
import torch twice, the helper more besides), and the helper warms up while the answer is
read. Standard library only until then: a cold check pays nothing for it, and a warm one
imports only what asking needs (its start is most of a warm check's fixed cost)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from coursekit import settings
from coursekit.errors import SettingError, UserError
from grader.helper.private import (
    PACKAGE_PARENT,
    HelperUnavailable,
    Paths,
    fingerprint,
    paths,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

    from grader.i18n.message import Message

MAX_LINE = 64 << 20
#: A check's time limit when its command line gives none: ``Limits().wall_s``, not imported
#: (``grader.common.limits`` imports dataclasses and inspect, which a warm check's client otherwise
#: never loads); tests/grader/test_commands.py checks that they agree.
DEFAULT_TIMEOUT_S = 120.0
#: How much longer than the notebook's time limit a client waits for the helper's answer.
ANSWER_MARGIN_S = 120.0


class Answer(NamedTuple):
    """What ``grader check`` prints and returns, as the helper's trusted process made it."""

    code: int
    stdout: str
    stderr: str

    def emit(self) -> int:
        sys.stdout.write(self.stdout)
        sys.stdout.flush()
        sys.stderr.write(self.stderr)
        sys.stderr.flush()
        return self.code


#: ``grader check``'s options that take a value (their allowed values, or None: any) and its
#: flags, as ``grader.check.command.add_arguments`` declares them: what :func:`quick_check`
#: passes on; anything else takes the full command line's way.
_VALUED = {"--format": ("text", "json", "html"), "--lesson": None, "--timeout": None,
           "--call-timeout": None, "--lang": ("en", "zh")}
_FLAGS = {"--profile"}
tried = False  # quick_check asked the helper (the full command line does not ask again)


def quick_check(argv: list[str]) -> int | None:
    """``python -m grader check ...`` answered by the running helper, with only this module
    imported (the full command line's imports and parser cost ~50 ms of a warm check's
    ~0.2 s); its exit code. None: not a check of one notebook with plain options, or no
    helper answered (:data:`tried` says which); the full command line takes it from there."""
    global tried
    options = _plain_check(argv)
    try:
        if options is None or settings.check_helper_minutes() is None:
            return None
    except SettingError:  # the full command line says it, in the reader's language
        return None
    from grader.check import timeline

    timeline.mark("main")
    tried = True
    with timeline.span("helper"):
        answer = check(argv, color=sys.stdout.isatty(),
                       timeout_s=float(options.get("--timeout", DEFAULT_TIMEOUT_S)) + ANSWER_MARGIN_S)
    if answer is None:
        return None
    if "--profile" in options:
        print(timeline.dumps(), file=sys.stderr)
    return answer.emit()


def _plain_check(argv: list[str]) -> dict[str, str] | None:
    """``check NOTEBOOK`` with options from :data:`_VALUED` (valid values) and
    :data:`_FLAGS`, as ``{option: value}``; None for anything else."""
    if not argv or argv[0] != "check":
        return None
    options: dict[str, str] = {}
    positional: list[str] = []
    rest = list(argv[1:])
    while rest:
        token = rest.pop(0)
        name, eq, value = token.partition("=")
        if token in _FLAGS:
            options[token] = ""
        elif name in _VALUED:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            allowed = _VALUED[name]
            if (allowed is not None and value not in allowed) or name in options:
                return None
            if name in ("--timeout", "--call-timeout"):
                try:
                    float(value)
                except ValueError:
                    return None
            options[name] = value
        elif token.startswith("-") or positional:
            return None
        else:
            positional.append(token)
    return options if positional else None


def check(argv: list[str], color: bool, timeout_s: float) -> Answer | None:
    """Run ``grader check argv`` in this user's running helper; None when none runs (or
    one retires, its code changed) or it cannot answer: then the caller checks the cold
    way, and calls :func:`start`."""
    if settings.check_helper_minutes() is None:
        return None
    try:
        where = paths()
        request = {"op": "check", "argv": list(argv), "cwd": os.getcwd(), "env": settings.course_variables(),
                   "color": bool(color), "fingerprint": fingerprint()}
        conn = connect(where.socket)
        if conn is None:
            return None
        with contextlib.closing(conn):
            reply = _ask(conn, request, timeout_s)
        if reply.get("stale"):  # it stops: start() starts one of this code
            _note("the helper ran older code and retired; checked cold")
            return None
        if "error" in reply:
            raise HelperUnavailable(str(reply["error"]))
        return Answer(int(reply["code"]), str(reply["stdout"]), str(reply["stderr"]))
    except (OSError, ValueError, KeyError, TypeError, HelperUnavailable) as exc:
        _note(f"check without the helper: {type(exc).__name__}: {exc}")
    return None


def start(wait_s: float = 0.0) -> bool:
    """Start this user's helper for this copy of the course, detached, unless one runs;
    with ``wait_s``, wait that long for it to be warm (``ready``). A check does not wait
    (the helper warms up while a cold check's answer is read, and the next check waits for
    it if it comes sooner). False when helpers are off."""
    minutes = settings.check_helper_minutes()
    if minutes is None:
        return False
    spawned: subprocess.Popen[bytes] | None = None
    try:
        where = paths()
        running = connect(where.socket)
        if running is not None:
            running.close()
        else:
            spawned = _spawn(where, minutes)
    except (OSError, HelperUnavailable) as exc:
        _note(f"could not start a helper: {type(exc).__name__}: {exc}")
        return True
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        status = None
        with contextlib.suppress(HelperError):
            status = request("status")
        if status is not None and status.get("ready"):
            break
        if status is None and spawned is not None and spawned.poll() is not None:
            break  # it stopped (its log says why) and no other one answers
        time.sleep(0.1)
    return True


class HelperError(UserError):
    """``grader helper status|stop`` could not ask the helper (exit 2): a message whose
    ``error`` is why (the system's words, or the helper's refusal as a message)."""


def request(op: str) -> dict[str, Any] | None:
    """``status`` or ``stop`` of this user's helper for this course (None: none runs)."""
    try:
        where = paths()
        conn = connect(where.socket)
        if conn is None:
            return None
        with contextlib.closing(conn):
            return _ask(conn, {"op": op}, 30.0)
    except (OSError, ValueError, HelperUnavailable) as exc:
        from grader.i18n.message import msg, said_by

        raise HelperError(msg("could not ask the check helper: {error}", error=said_by(exc))) from exc


def status_lines(reply: dict[str, Any]) -> list[Message | str]:
    """``grader helper status``'s lines, one ``key: value`` each (in English as they always
    read, so that a script can parse them), as messages the reader's language tells; a key
    this client does not know as it came."""
    from grader.i18n.message import msg

    said: dict[str, Callable[[Any], Message]] = {
        "pid": lambda value: msg("pid: {pid}", pid=value),
        "socket": lambda value: msg("socket: {path}", path=value),
        "ready": lambda value: msg("ready: {ready}", ready=value),
        "checks": lambda value: msg("checks: {count}", count=value),
        "active": lambda value: msg("active: {count}", count=value),
        "idle_s": lambda value: msg("idle_s: {seconds}", seconds=value),
        "stops_after_idle_s": lambda value: msg("stops_after_idle_s: {seconds}", seconds=value),
        "uptime_s": lambda value: msg("uptime_s: {seconds}", seconds=value),
        "protections": lambda value: msg("protections: {protections}", protections=value),
        "log": lambda value: msg("log: {path}", path=value)}
    lines: list[Message | str] = []
    for key, value in reply.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        if key in said:
            lines.append(said[key]((msg("True") if value else msg("False")) if isinstance(value, bool) else shown))
        elif key != "ok":
            lines.append(f"{key}: {shown}")
    return lines


def _note(text: str) -> None:
    """A line in the helper's log (never on the check's own output; on stderr too at
    ``--log-level info`` and below)."""
    import logging  # here: a warm check imports no more than asking needs

    from grader.common import logs

    with contextlib.suppress(OSError, HelperUnavailable):
        logs.append(paths().log, logs.CLIENT, logging.getLogger(__name__), logging.INFO, "%s",
                    text)


def connect(path: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    return conn


def _spawn(where: Paths, minutes: float) -> subprocess.Popen[bytes]:
    """A helper process, detached from this one (a second one started at the same time
    finds the first listening, and exits)."""
    import subprocess  # here: a warm check never starts one

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(PACKAGE_PARENT), os.environ.get("PYTHONPATH", "")) if p))
    with open(where.log, "a", encoding="utf-8") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "grader.helper", "serve", "--idle-minutes", f"{minutes:g}"],
            cwd=PACKAGE_PARENT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True)


def _ask(conn: socket.socket, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    conn.settimeout(timeout_s)
    write_line(conn, message)
    return read_line(conn, timeout_s)


def read_line(conn: socket.socket, timeout_s: float) -> dict[str, Any]:
    """One JSON object on one line: a request (the helper) or its answer (the client)."""
    conn.settimeout(timeout_s)
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise HelperUnavailable("the connection closed before a whole line")
        data += chunk
        if len(data) > MAX_LINE:
            raise HelperUnavailable("a line too long")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise HelperUnavailable("a line that is not a JSON object")
    return message


def write_line(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")
