"""The helper's trusted zygote: a process with the graders imported (torch, the hidden
tests' modules) that never grades anything, and forks one trusted process per check. That
process runs ``grader.check.command.main`` with the client's command line, its workers lent by
the helper (``lend.HelperSource``), and writes the answer to the client itself. A fork server
built as the grader's others are, served by their one loop (``grader.runtime.forkserver``):
it says :class:`Ready` once warm, and answers each :class:`Fork` (with the client's
connection and the trusted process's lending channel) :class:`Forked`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from typing import Any, ClassVar

from coursekit import settings
from grader.helper.lend import HelperSource
from grader.helper.private import HelperUnavailable
from grader.runtime import forkserver
from grader.runtime.wire import Channel, one_thread_each, pair


@dataclass
class Ready:
    """Warm: the graders are imported."""


@dataclass
class Fork:
    """A check: the client's request, with its connection and the lending channel."""

    fds: ClassVar[int] = 2
    request: dict[str, Any]


@dataclass
class Forked:
    pid: int


class TrustedZygote:
    """The helper's handle on its trusted zygote (forked before any thread starts)."""

    def __init__(self, close_in_child: list[socket.socket]):
        ours, theirs = pair()
        pid = forkserver.fork_child([ours, *close_in_child])
        if pid == 0:
            try:
                _trusted_zygote(Channel(theirs))
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid
        self.process = forkserver.Child(pid, ours=True)
        self.ctrl = Channel(ours)
        self._ready = False
        self._lock = threading.Lock()

    def fork(self, req: dict[str, Any], fds: list[int], timeout: float) -> int:
        """A trusted process for ``req``, handed ``fds`` (the client, its worker channel)."""
        with self._lock:
            try:
                if not self._ready:
                    forkserver.expect(self.ctrl, Ready, timeout)
                    self._ready = True
            except forkserver.NoAnswer:
                raise HelperUnavailable("the trusted zygote did not start") from None
            try:
                forked, _ = forkserver.call(self.ctrl, Fork(req), Forked, 30.0, fds)
            except forkserver.NoAnswer:
                raise HelperUnavailable("the trusted zygote did not fork") from None
        return forked.pid

    def alive(self) -> bool:
        return self.process.alive()

    def close(self) -> None:
        self.ctrl.close()
        self.process.close(grace_s=5, killed_s=None)


#: What a check's trusted process imports besides the graders (the last two: see
#: ``grader.sandbox.pool.DEFAULT_PRELOAD``).
PRELOAD = ("grader.sandbox", "safetensors", "torch.fx.experimental.symbolic_shapes",
           "torch._dynamo")


def _warm_up() -> None:
    """What every check's trusted side imports, imported once. Nothing runs a check here."""
    from grader.check import (
        command,
        engine,  # noqa: F401 - imported once, here
        launch,  # noqa: F401
        runner,
    )
    from grader.runtime import target  # noqa: F401 - backward(), values on the trusted side
    from grader.testkit import (
        lessons,
        parts,
    )

    command.parser()  # every check parses its command line
    _read_catalogues()
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    for lesson in lessons.known_lessons():
        with contextlib.suppress(Exception):
            runner.collect(lesson)  # imports the hidden tests' module (and torch)
            parts.prepare(sys.modules[f"grader.hidden.test_{lesson}"])


def _read_catalogues() -> None:
    """Every language's catalogue read (Babel parses a ``.po``: tens of milliseconds of
    CPU), once, here: the trusted process of a check in that language inherits the table
    instead of parsing it again. English has none (``catalogues.table("en")`` reads
    nothing)."""
    from grader.i18n import LANGUAGES, catalogue

    for lang in LANGUAGES:
        catalogue(lang)


def _trusted_zygote(ctrl: Channel) -> None:
    """Fork one trusted process per request; never grade anything here. A process is
    forked ahead, while no check runs, and waits for its request: a check does not wait
    for the fork (copying this process's page tables) nor compete with the next one's."""
    one_thread_each()
    try:
        _warm_up()
    except Exception:  # noqa: BLE001 - logged; each check imports what it lacks
        traceback.print_exc()
    forkserver.tell(ctrl, Ready())
    forker = _Forker(ctrl)
    forkserver.serve(ctrl, {Fork: forker.fork}, tick=forker.tick)


class _Forker:
    """The trusted processes: the one forked ahead, and those running a check."""

    def __init__(self, ctrl: Channel):
        self.ctrl = ctrl
        self.spare: tuple[int, Channel] | None = None
        self.running: set[int] = set()

    def tick(self) -> float:
        """Reap the checks that ended; fork one ahead once none runs. How long to wait:
        short while a check runs (its end is when to fork the next one ahead)."""
        self.running.difference_update(pid for pid, _ in forkserver.reaped())
        if self.spare is None and not self.running:
            self.spare = _fork_ahead(self.ctrl)
        return 1.0 if self.spare is not None else 0.05

    def fork(self, req: Fork, fds: list[int]) -> Forked:
        pid = _hand_over(self.ctrl, self.spare, req, fds)
        self.spare = None
        self.running.add(pid)
        return Forked(pid)


def _fork_ahead(ctrl: Channel) -> tuple[int, Channel]:
    """A trusted process that waits for its request (and the client's descriptors) on a
    channel of its own, and exits unchecked when that channel closes first."""
    ours, theirs = pair()
    pid = forkserver.fork_child([ctrl.sock, ours])
    if pid == 0:
        waiting = Channel(theirs)
        try:
            req, fds = forkserver.expect(waiting, Fork, None, fds=True)
        except forkserver.NoAnswer:
            os._exit(0)
        waiting.close()
        _trusted_process(req.request, fds)
        os._exit(0)
    theirs.close()
    return pid, Channel(ours)


def _hand_over(ctrl: Channel, spare: tuple[int, Channel] | None, req: Fork,
               fds: list[int]) -> int:
    """The pid of the trusted process that runs ``req``: the one forked ahead, or (checks
    at once, or that one gone) one forked now."""
    for ahead in (spare, None):
        pid, waiting = ahead or _fork_ahead(ctrl)
        try:
            forkserver.tell(waiting, req, fds)
            return pid
        except OSError:
            continue
        finally:
            waiting.close()
    raise HelperUnavailable("no trusted process took the check")


def _trusted_process(req: dict[str, Any], fds: list[int]) -> None:
    """Run ``grader check`` for one client, exactly as its own process would have."""
    client = socket.socket(fileno=fds[0])
    rpc = Channel(socket.socket(fileno=fds[1]))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    answer = {"code": 1, "stdout": "", "stderr": "grader: the check helper failed\n"}
    try:
        _fresh_state(req)
        answer = _run_check(req, rpc)
    except BaseException:  # noqa: BLE001 - the client checks the cold way
        answer = {"error": traceback.format_exc(limit=5)}
        traceback.print_exc(file=sys.__stderr__)
    finally:
        with contextlib.suppress(OSError):
            client.sendall(json.dumps(answer).encode() + b"\n")
            client.close()


def _fresh_state(req: dict[str, Any]) -> None:
    """The client's course settings and folder; random states of a new process."""
    settings.use_course_variables(dict(req.get("env", {})))
    os.chdir(str(req["cwd"]))
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:  # the CPU's generator: torch.seed() would also queue a seed for
        torch.default_generator.seed()  # CUDA, which stores the caller's stack (10 ms)


def _run_check(req: dict[str, Any], rpc: Channel) -> dict[str, Any]:
    """``grader check`` as the client's own process would have run it (its command line,
    colours as its terminal has them), with workers from the helper; what it wrote to
    stdout and stderr, and its exit status."""
    from grader.check import command as checking
    from grader.check import timeline
    from grader.outputs.render import check_output

    timeline.mark("main")  # where a cold check's ``main`` starts (``--profile``)
    argv = [str(a) for a in req["argv"]]
    if not argv or argv[0] != "check":
        return {"error": "the helper only runs `check`"}
    sandbox = req.get("sandbox")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            code = checking.main(checking.parse(argv[1:]), check_output,
                                 source=lambda limits: HelperSource(rpc, sandbox),
                                 color=bool(req.get("color")))
        except SystemExit as exc:  # argparse: usage on stderr
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    if stream is not None:
                        stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
    return {"code": int(code or 0), "stdout": texts[0], "stderr": texts[1]}

