"""No wait without a bound: a held zygote, a dead zygote that cannot be replaced, a zygote
that never answers, and a helper or trusted process that never answers each end in a clear
error within the bound (the pool's, the helper's), never in a wait that does not end."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.common.limits import Limits
from grader.helper import lend
from grader.runtime.wire import Channel
from grader.sandbox import SandboxPool, SandboxWorker
from grader.sandbox import pool as pool_module
from grader.sandbox.pool import SandboxError

pytestmark = pytest.mark.sandbox

ENTRY = b"""
def serve(sock):
    while sock.recv(1 << 16):
        pass
"""
WORKER_FILES = {"bounds_entry.py": ENTRY}


@pytest.fixture
def small_pool() -> Iterator[SandboxPool]:
    with SandboxPool(jobs=1, entry="bounds_entry:serve", worker_files=WORKER_FILES,
                     preload=()) as p:
        yield p


def _done(worker: SandboxWorker) -> str:
    worker.sock.close()
    return worker.finish()


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += [child for child, parent in parents.items() if parent == current]
    return found


def test_a_held_zygote_ends_in_an_error_within_the_bound(small_pool: SandboxPool) -> None:
    held = small_pool.start()
    try:
        began = time.monotonic()
        with pytest.raises(SandboxError, match="no sandbox zygote came free within 1 s"):
            small_pool.start(wait_s=1.0)
        assert time.monotonic() - began < 5
    finally:
        assert _done(held) == "ok"
    assert _done(small_pool.start(wait_s=1.0)) == "ok"  # released: served again at once


def test_the_default_bound_follows_the_longest_wall_clock(
        small_pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "RELEASE_MARGIN_S", 0.5)
    held = small_pool.start(Limits(wall_s=1.5))  # killed at 1.5 s, but never finished
    try:
        began = time.monotonic()
        with pytest.raises(SandboxError, match="within 2 s"):
            small_pool.start(Limits(wall_s=0.5))
        assert 1.5 < time.monotonic() - began < 6
    finally:
        held.finish()


def test_a_dead_zygote_that_cannot_be_replaced_is_an_error_at_once(
        small_pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    for zygote in list(small_pool._zygotes):
        os.killpg(zygote.proc.pid, signal.SIGKILL)
        zygote.proc.wait()

    def cannot_start() -> None:
        raise OSError("no more processes")

    monkeypatch.setattr(small_pool, "_new_zygote", cannot_start)
    began = time.monotonic()
    with pytest.raises(SandboxError, match="died and none could replace it"):
        small_pool.start()
    with pytest.raises(SandboxError, match="no sandbox zygote is left"):
        small_pool.start()
    assert time.monotonic() - began < 5


def test_a_zygote_that_never_answers_is_an_error_then_replaced(small_pool: SandboxPool) -> None:
    small_pool.answer_timeout = 1.0
    (zygote,) = small_pool._zygotes
    stopped = _descendants(zygote.proc.pid)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(SandboxError, match="did not answer within 1 s"):
            small_pool.start()
        assert time.monotonic() - began < 8
        assert zygote not in small_pool._zygotes  # replaced, never handed out again
        assert _done(small_pool.start()) == "ok"
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def test_the_helpers_rpc_has_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trusted process whose helper never answers gets HelperUnavailable (its client then
    checks the cold way), not a hang."""
    ours, theirs = socket.socketpair()
    monkeypatch.setattr(lend, "RPC_WAIT_S", 0.5)
    monkeypatch.setattr(pool_module, "RELEASE_MARGIN_S", 0.2)
    source = lend.HelperSource(Channel(ours))
    began = time.monotonic()
    try:
        with pytest.raises(lend.HelperUnavailable, match="did not answer within"):
            source.start(Limits(wall_s=0.3))
        with pytest.raises(lend.HelperUnavailable, match=r"did not answer within 0\.5 s \(finish\)"):
            lend.HelperWorker(source, 1, 0, socket.socket(), Limits()).finish()
    finally:
        ours.close()
        theirs.close()
    assert time.monotonic() - began < 5


def test_the_helper_stops_lending_to_a_silent_trusted_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.common.limits

    monkeypatch.setattr(grader.common.limits, "DEFAULT_LIMITS", Limits(wall_s=0.3))
    monkeypatch.setattr(pool_module, "RELEASE_MARGIN_S", 0.2)
    ours, theirs = socket.socketpair()
    began = time.monotonic()
    try:
        lend.lend_workers(Channel(ours), source=None)  # never asked for anything
    finally:
        ours.close()
        theirs.close()
    assert time.monotonic() - began < 5
