"""grader.runtime.forkserver: the one fork-server module the sandbox's zygotes, the helper's
trusted zygote and the class grader's trusted processes are built from."""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from support import ROOT

from grader.runtime import forkserver
from grader.runtime.wire import Channel, pair

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")


def _report_from_child(write_fd: int, facts: dict) -> None:
    os.write(write_fd, json.dumps(facts).encode())
    os._exit(0)


def test_the_child_inherits_its_parents_objects_frozen_and_the_parent_keeps_collecting() -> None:
    """The child's garbage collections never scan what it inherits (a warm zygote's torch);
    the parent's objects are unfrozen again, its own collections as before."""
    read_fd, write_fd = os.pipe()
    pid = forkserver.fork_child([read_fd])
    if pid == 0:
        _report_from_child(write_fd, {"frozen": gc.get_freeze_count()})
    os.close(write_fd)
    facts = json.loads(os.read(read_fd, 4096))
    os.close(read_fd)
    assert forkserver.Child(pid, ours=True).wait(10)
    assert facts["frozen"] > 1000 and gc.get_freeze_count() == 0


def test_the_child_closes_what_it_is_told_and_leads_a_session_with_default_signals() -> None:
    read_fd, write_fd = os.pipe()
    kept, closed = pair()
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        pid = forkserver.fork_child([read_fd, closed], new="session",
                                    default_signals=[signal.SIGUSR1])
        if pid == 0:
            def is_open(fd: int) -> bool:
                try:
                    os.fstat(fd)
                except OSError:
                    return False
                return True

            _report_from_child(write_fd, {
                "read_open": is_open(read_fd), "sock_closed": closed.fileno() == -1,
                "sid": os.getsid(0), "pid": os.getpid(),
                "usr1_default": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL})
    finally:
        signal.signal(signal.SIGUSR1, previous)
    os.close(write_fd)
    facts = json.loads(os.read(read_fd, 4096))
    os.close(read_fd)
    child = forkserver.Child(pid, ours=True)
    assert child.wait(10)
    assert os.WIFEXITED(child.status) and os.WEXITSTATUS(child.status) == 0
    assert facts == {"read_open": False, "sock_closed": True, "sid": facts["pid"],
                     "pid": pid, "usr1_default": True}
    kept.close()


def test_a_new_group_is_killed_whole() -> None:
    pid = forkserver.fork_child(new="group")
    if pid == 0:
        forkserver.fork_child()  # a grandchild in the same group; both sleep
        time.sleep(60)
        os._exit(0)
    child = forkserver.Child(pid, ours=True, group=True)
    time.sleep(0.2)
    assert os.getpgid(pid) == pid
    assert not child.wait(0.05) and child.alive()
    child.kill()
    assert child.wait(10)
    assert os.WIFSIGNALED(child.status) and os.WTERMSIG(child.status) == signal.SIGKILL
    with pytest.raises(ProcessLookupError):  # the grandchild went with the group
        for _ in range(200):
            os.killpg(pid, 0)
            time.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_child_dies_with_its_parent_and_is_found_ended_by_pidfd() -> None:
    read_fd, write_fd = os.pipe()
    middle = forkserver.fork_child([read_fd])
    if middle == 0:
        grandchild = forkserver.fork_child([write_fd], dies_with_parent=True)
        if grandchild == 0:
            time.sleep(60)
            os._exit(0)
        os.write(write_fd, str(grandchild).encode())
        time.sleep(0.3)
        os._exit(0)  # the grandchild's parent ends: the kernel kills it
    os.close(write_fd)
    grandchild = int(os.read(read_fd, 64))
    os.close(read_fd)
    seen = forkserver.Child(grandchild)  # not ours: known by its pidfd
    assert seen.alive()
    assert forkserver.Child(middle, ours=True).wait(10)
    assert seen.wait(10), "the grandchild outlived the process that forked it"
    assert seen.close(grace_s=0)


def test_a_child_forked_too_late_for_its_parent_exits_at_once(monkeypatch) -> None:
    monkeypatch.setattr(os, "getppid", lambda: -1)  # as if the parent had died meanwhile
    pid = forkserver.fork_child(dies_with_parent=True)
    if pid == 0:
        os._exit(0)
    child = forkserver.Child(pid, ours=True)
    assert child.wait(10)
    assert os.WEXITSTATUS(child.status) == (
        forkserver.FORK_FAILED_EXIT if sys.platform.startswith("linux") else 0)


def test_reaped_yields_each_ended_child_once() -> None:
    pids = {forkserver.fork_child() or os._exit(code): code for code in (3, 4)}
    found: dict[int, int] = {}
    deadline = time.monotonic() + 10
    while len(found) < 2 and time.monotonic() < deadline:
        found.update((pid, os.WEXITSTATUS(status)) for pid, status in forkserver.reaped()
                     if pid in pids)
        time.sleep(0.01)
    assert found == pids
    assert [p for p, _ in forkserver.reaped() if p in pids] == []


def test_may_fork_only_with_one_thread() -> None:
    """A fresh interpreter runs one thread; this one (a pytest worker that may have run torch,
    whose thread pool the kernel counts) need not: a second Python thread is refused here."""
    alone = subprocess.run([sys.executable, "-c", "from grader.runtime import forkserver; "
                            "print(forkserver.may_fork())"], capture_output=True, text=True, timeout=120)
    assert alone.stdout.strip() == "True", alone.stderr
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forkserver.may_fork()
    finally:
        stop.set()
        thread.join()


@dataclass
class Ready:
    pid: int


@dataclass
class Echo:
    text: str


@dataclass
class Pass:
    """A request that brings one descriptor."""

    fds: ClassVar[int] = 1


@dataclass
class Said:
    text: str


def test_expect_bounds_the_wait_and_names_what_came_instead() -> None:
    ours, theirs = pair()
    channel, server = Channel(ours), Channel(theirs)
    began = time.monotonic()
    with pytest.raises(forkserver.NoAnswer, match="no Ready within 0.05 s") as waited:
        forkserver.expect(channel, Ready, timeout=0.05)
    assert waited.value.got is None and waited.value.timed_out
    assert time.monotonic() - began < 5
    server.send({"op": "oops"})
    with pytest.raises(forkserver.NoAnswer, match="got {'op': 'oops'}") as wrong:
        forkserver.expect(channel, Ready, timeout=5)
    assert wrong.value.got == {"op": "oops"}
    read_fd, write_fd = os.pipe()
    forkserver.tell(server, Ready(7), [read_fd])
    assert forkserver.expect(channel, Ready, timeout=5) == Ready(7)
    os.close(read_fd)
    os.close(write_fd)
    server.close()
    with pytest.raises(forkserver.NoAnswer, match="the other end has ended"):  # no wait
        forkserver.expect(channel, Ready, timeout=None)
    channel.close()


def _serving(**how) -> tuple[Channel, threading.Thread, list]:
    """A channel to a serve loop in a thread that echoes and counts the descriptors it is
    passed (``ended`` gets True once the loop returns)."""
    ours, theirs = pair()
    server, ended = Channel(theirs), []

    def passed(req: Pass, fds: list[int]) -> Said:
        os.fstat(fds[0])
        return Said(f"{len(fds)} fd")

    def run() -> None:
        forkserver.serve(server, {Echo: lambda req, _: Said(req.text), Pass: passed}, **how)
        ended.append(True)
        server.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return Channel(ours), thread, ended


def test_the_serve_loop_answers_refuses_what_it_does_not_serve_and_serves_on() -> None:
    client, thread, _ = _serving()
    assert forkserver.call(client, Echo("hi"), Said, 5) == (Said("hi"), [])
    client.send({"op": "format_disk"})
    refused = forkserver.expect(client, forkserver.Refused, 5)
    assert refused.error == "unknown request 'format_disk'"
    with pytest.raises(forkserver.NoAnswer, match="Said refused: unknown request 'Said'"):
        forkserver.call(client, Said("not a request"), Said, 5)  # a reply is no request
    client.send({"op": "Echo", "text": "x", "extra": 1})
    assert "fields that do not fit" in forkserver.expect(client, forkserver.Refused, 5).error
    read_fd, write_fd = os.pipe()
    with pytest.raises(forkserver.NoAnswer, match="'Pass' with 0 descriptor"):
        forkserver.call(client, Pass(), Said, 5)
    assert forkserver.call(client, Pass(), Said, 5, fds=[read_fd])[0] == Said("1 fd")
    os.close(read_fd)
    with pytest.raises(BrokenPipeError):  # the loop closed the copy it was passed
        for _ in range(1 << 16):
            os.write(write_fd, b"x" * 4096)
    os.close(write_fd)
    assert forkserver.call(client, Echo("still here"), Said, 5)[0] == Said("still here")
    client.close()
    thread.join(5)
    assert not thread.is_alive(), "the loop did not end with its channel"


def test_a_request_after_the_servers_end_gets_a_clear_error_at_once() -> None:
    client, thread, ended = _serving()
    client.sock.shutdown(socket.SHUT_WR)  # our end of the channel: the loop ends
    thread.join(5)
    assert ended == [True]
    began = time.monotonic()
    with pytest.raises(forkserver.NoAnswer, match="the other end has ended|not sent|Broken pipe"):
        forkserver.call(client, Echo("anyone?"), Said, timeout=60)
    assert time.monotonic() - began < 5, "the request waited out its bound"
    client.close()


def test_a_silent_client_is_given_up_after_the_bound_the_server_sets() -> None:
    ticks: list[float] = []
    client, thread, ended = _serving(tick=lambda: ticks.append(0.05) or 0.05,
                                     silent=lambda: len(ticks) < 3)
    thread.join(5)
    assert ended == [True] and len(ticks) == 3
    client.close()


def test_a_failed_handler_is_refused_where_the_server_says_and_ends_it_otherwise() -> None:
    def fail(req, fds):
        raise RuntimeError("no disk")

    ours, theirs = pair()
    client, server = Channel(ours), Channel(theirs)
    client.send({"op": "Echo", "text": "?"})
    client.send({"op": "Echo", "text": "?"})
    client.sock.shutdown(socket.SHUT_WR)
    forkserver.serve(server, {Echo: fail},
                     failed=lambda exc: forkserver.Refused(f"{type(exc).__name__}: {exc}"))
    assert forkserver.expect(client, forkserver.Refused, 5).error == "RuntimeError: no disk"
    assert forkserver.expect(client, forkserver.Refused, 5).error == "RuntimeError: no disk"
    ours, theirs = pair()
    client, server = Channel(ours), Channel(theirs)
    client.send({"op": "Echo", "text": "?"})
    with pytest.raises(RuntimeError, match="no disk"):
        forkserver.serve(server, {Echo: fail})


def test_the_loop_wakes_for_a_watched_descriptor() -> None:
    read_fd, write_fd = os.pipe()
    seen: list[bytes] = []
    client, thread, ended = _serving(watch={read_fd: lambda: seen.append(os.read(read_fd, 9))})
    os.write(write_fd, b"child")
    assert forkserver.call(client, Echo("after"), Said, 5)[0] == Said("after")
    assert seen == [b"child"]
    client.close()
    thread.join(5)
    os.close(read_fd)
    os.close(write_fd)


def test_close_waits_its_grace_then_kills_a_started_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    child = forkserver.Child.started(proc, group=True)
    assert child.alive()
    start = time.monotonic()
    assert child.close(grace_s=0.2)
    assert 0.2 <= time.monotonic() - start < 10
    assert proc.returncode == -signal.SIGKILL
    quick = forkserver.Child.started(subprocess.Popen([sys.executable, "-c", "pass"]))
    assert quick.close(grace_s=30) and quick.popen.returncode == 0


# -- the one module that forks -------------------------------------------------------------

#: What forks a process (a copy of the caller): grader.runtime.forkserver alone does.
FORKS = {"os.fork", "os.forkpty", "pty.fork", "os.register_at_fork"}
#: What starts a fresh program (exec: nothing of the caller's memory), and where the grader
#: does: each is a process of CONTRIBUTING.md's "Processes" or a tool's, not a fork server.
EXECS = {"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
         "subprocess.check_output", "os.posix_spawn", "os.posix_spawnp", "os.system",
         *(f"os.{name}" for name in ("execv", "execve", "execvp", "execvpe", "execl", "execle",
                                      "execlp", "execlpe", "spawnv", "spawnve", "spawnl"))}
STARTS_PROGRAMS = {
    "grader/sandbox/pool.py": "the sandbox zygote (python -I -B _zygote.py, in bubblewrap)",
    "grader/sandbox/_zygote.py": "process 1 of a worker's pid namespace (sleep, by vfork)",
    "grader/sandbox/probe.py": "the probes of what this machine offers (bwrap, namespaces)",
    "grader/check/launch.py": "a cold check's worker without the sandbox (python -m grader.runtime.worker)",
    "grader/helper/client.py": "the check helper (python -m grader.helper serve)",
    "grader/classgrade/jobs.py": "grade --jobs N's first trusted job (python -m grader.classgrade.jobs)",
    "grader/authoring/generate.py": "nbgrader generate_assignment, and itself per lesson",
    "grader/integrations/gradescope/package.py": "git rev-parse, for the package's name",
}


def process_starts(root: Path) -> dict[str, set[str]]:
    """``{file: {"os.fork", "subprocess.Popen", ...}}``: what each module of ``root/grader``
    names of ``FORKS`` and ``EXECS`` (called or passed on), by its module's name."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / "grader").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)}
        names |= {f"{node.module}.{alias.name}" for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) for alias in node.names}
        names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                  for alias in node.names if alias.name == "multiprocessing"}
        starts = names & (FORKS | EXECS | {"multiprocessing"})
        if starts:
            found[path.relative_to(root).as_posix()] = starts
    return found


def test_process_starts_are_found(tmp_path: Path) -> None:
    (tmp_path / "grader" / "helper").mkdir(parents=True)
    (tmp_path / "grader" / "helper" / "zygote.py").write_text(
        "import os, multiprocessing\nfrom subprocess import Popen\n"
        "def f():\n    return os.fork() or os.getpid()\n")
    assert process_starts(tmp_path) == {
        "grader/helper/zygote.py": {"os.fork", "subprocess.Popen", "multiprocessing"}}


def test_one_module_forks_and_the_others_start_programs() -> None:
    """Issue 53, item 1: the three fork servers fork through ``grader.runtime.forkserver``
    (``fork_child``); elsewhere a process is a fresh program, started where the table above
    says why, and never by ``multiprocessing``."""
    starts = process_starts(ROOT)
    forking = {path for path, names in starts.items() if names & (FORKS | {"multiprocessing"})}
    assert forking == {"grader/runtime/forkserver.py"}
    assert {path for path, names in starts.items() if names & EXECS} - {
        "grader/runtime/forkserver.py"} == set(STARTS_PROGRAMS)


def fork_server_table(contributing: str) -> set[str]:
    """The modules of CONTRIBUTING.md's table of fork servers ("Processes: who forks whom"):
    each row's last column, its first path (``sandbox/_zygote.py``), under ``grader/``."""
    section = contributing.split("## Processes: who forks whom", 1)[1].split("\n## ", 1)[0]
    rows = section.split("| fork server |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return {"grader/" + re.findall(r"`([^`]+\.py)`", row.rsplit(" | ", 1)[1])[0] for row in rows}


def test_the_process_picture_names_each_fork_server() -> None:
    """Every module that forks through ``forkserver.fork_child`` is a row of CONTRIBUTING's
    table, and every row such a module."""
    forking = {path.relative_to(ROOT).as_posix() for path in (ROOT / "grader").rglob("*.py")
               if "fork_child(" in path.read_text(encoding="utf-8")} - {"grader/runtime/forkserver.py"}
    assert fork_server_table((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")) == forking
    assert forking == {"grader/sandbox/_zygote.py", "grader/helper/zygote.py", "grader/classgrade/jobs.py"}
