"""grader.runtime.forkserver: the one fork-server module the sandbox's zygotes, the helper's
trusted zygote and the class grader's trusted processes are built from."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from grader.runtime import forkserver
from grader.runtime.wire import Channel, pair

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")


def _report_from_child(write_fd: int, facts: dict) -> None:
    os.write(write_fd, json.dumps(facts).encode())
    os._exit(0)


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


def test_expect_bounds_the_wait_and_names_what_came_instead() -> None:
    ours, theirs = pair()
    channel, server = Channel(ours), Channel(theirs)
    with pytest.raises(forkserver.NoAnswer) as waited:
        forkserver.expect(channel, "ready", timeout=0.05)
    assert waited.value.got is None
    server.send({"op": "oops"})
    with pytest.raises(forkserver.NoAnswer, match="got {'op': 'oops'}") as wrong:
        forkserver.expect(channel, "ready", timeout=5)
    assert wrong.value.got == {"op": "oops"}
    read_fd, write_fd = os.pipe()
    server.send({"op": "ready", "pid": 7}, [read_fd])
    assert forkserver.expect(channel, "ready", timeout=5) == {"op": "ready", "pid": 7}
    os.close(read_fd)
    os.close(write_fd)
    server.close()
    with pytest.raises(forkserver.NoAnswer):  # its end: no wait
        forkserver.expect(channel, "ready", timeout=None)
    channel.close()


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
