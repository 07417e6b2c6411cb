"""A submission running in a worker process, reached over a socket."""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from grader.check import timeline
from grader.common.limits import DEFAULT_LIMITS
from grader.runtime import protocol, values
from grader.runtime.errors import (
    BadValue,
    CallCrashed,
    CallHung,
    GradingError,
    MissingName,
    ProtocolError,
    SubmissionError,
    WorkerDied,
    WorkerTimeout,
)
from grader.testkit.calls import describe_request
from grader.testkit.submission import Later, Posted, Submission

MAX_IN_FLIGHT = 64 << 10  # bytes of requests sent before their answers are read (well under
# a socket's buffer: the sender never blocks while the worker waits to send an answer)
SEND_TOGETHER = 32  # a batch's calls written this many at a time, the first at once (the
# worker runs it while the next are encoded): one wake-up for many calls, not one a call


@dataclass
class _Pending:
    """A request sent, its answer not read yet."""

    op: str
    header: dict[str, Any]
    value: Any
    seconds: float  # its time limit
    sent: float  # time.monotonic() when sent (written to the socket)
    later: Later | None  # where its result goes (a batch's call), or None: its error is raised
    chain: int  # the worker skips the rest of a chain after a failure in it
    size: int  # bytes sent


class RemoteSubmission(Submission):
    """Talks to ``grader.runtime.worker.serve`` on the other end of ``sock``.

    Requests whose answer is not needed at once (``_post``: loading weights, ``eval()``, a
    batch's calls) are sent without waiting and answered with the next request: one round
    trip for all of them. Each still has its own time limit, counted from when the worker
    could start it. A lazy batch's answers are read when a result is used (``read``), so
    the check's own work in between runs while the worker runs the calls.

    Once the worker times out, dies or sends garbage, every later request fails at once
    with the same error, so the remaining checks fail fast instead of waiting. A request
    that hangs or kills the worker raises ``CallHung`` / ``CallCrashed``, which name it
    (function and argument shapes, never the values: ``grader.testkit.calls``).
    """

    def __init__(self, sock: socket.socket, call_timeout: float = DEFAULT_LIMITS.call_s):
        self.sock = sock
        self.call_timeout = call_timeout
        self.broken: Exception | None = None
        self._types: dict[int, str] = {}  # handle id -> type name, to name a hung method
        self._pending: list[_Pending] = []  # sent, answer not read yet, in order
        self._in_flight = 0  # bytes of the requests in _pending
        self._chain = 0  # the worker skips the rest of a chain after a failure in it
        self._failed: dict[int, Exception] = {}  # chain -> its failure, for the requests skipped
        self._answered = 0.0  # when the last answer came (the worker then started the next)
        self._answers = protocol.Reader(sock)
        self._unsent: list[bytes] = []  # a batch's requests, written together (_flush)
        self._loading: tuple[float, list[tuple[int, str]]] | None = None  # begin_load's

    def begin_load(self, cells: list[tuple[int, str]], timeout: float) -> None:
        """Send the notebook's cells without waiting: the worker runs them while this
        process goes on (a cold check imports the hidden tests meanwhile); :meth:`load`
        reads the answer. A failure to send is kept for :meth:`load` to raise."""
        self._loading = (time.time(), cells)
        with contextlib.suppress(GradingError):  # in self.broken: load raises it
            self._send("load", {}, {"cells": [list(c) for c in cells]}, timeout, None)

    def load(self, cells: list[tuple[int, str]], timeout: float) -> dict[str, Any]:
        """Run the notebook's cells (those sent by :meth:`begin_load`, if it was called)."""
        if self._loading is None:
            self.begin_load(cells, timeout)
        assert self._loading is not None
        (start, cells), self._loading = self._loading, None
        if self.broken is not None:
            raise self.broken
        reply = self._drain(waited=True)
        self.note_load(cells, reply)
        timeline.add("load", start, end := time.time())
        seconds = reply.get("seconds") if isinstance(reply, dict) else None
        if type(seconds) is float and 0 <= seconds <= end - start:  # the worker's own word
            timeline.add("cells", end - seconds, end)
        return reply

    def _request(self, op: str, header: dict[str, Any], value: Any = None,
                 timeout: float | None = None) -> Any:
        self._send(op, header, value, timeout or self.call_timeout, None)
        return self._drain(waited=True)

    def _post(self, op: str, header: dict[str, Any], value: Any = None,
              later: Later | None = None) -> None:
        """Send without waiting: the answer is read with the next request (or ``settle``)."""
        self._send(op, header, value, self.call_timeout, later)

    def settle(self) -> None:
        if self.broken is not None:  # the next request raises why
            _abandon(self._pending, self.broken)
            self._pending, self._in_flight, self._unsent = [], 0, []
        elif self._pending:
            self._drain()

    def read(self, later: Later) -> None:
        if self.broken is not None:
            self.settle()
        elif any(p.later is later for p in self._pending):
            self._drain(upto=later)

    def cut(self) -> None:
        self._flush()  # a lazy batch ends: its calls run while the check goes on
        self._chain += 1

    def _send(self, op: str, header: dict[str, Any], value: Any, seconds: float,
              later: Later | None) -> None:
        if self.broken is not None:
            raise self.broken
        data = protocol.encode(dict(header, op=op, chain=self._chain), value)
        if self._pending and self._in_flight + len(data) > MAX_IN_FLIGHT:
            self._drain()  # both ways' buffers full would block both ends: read the answers first
            data = protocol.encode(dict(header, op=op, chain=self._chain), value)
        pending = _Pending(op, header, value, seconds, time.monotonic(), later, self._chain,
                           len(data))
        idle = len(self._pending) == len(self._unsent)  # the worker has nothing to run
        self._pending.append(pending)
        self._in_flight += len(data)
        self._unsent.append(data)
        if later is None or idle or len(self._unsent) >= SEND_TOGETHER:
            self._flush()  # else a batch's call waits for the next ones, or for a read

    def _flush(self) -> None:
        """Write the requests not written yet, in one write; each one's time counts from
        then (or from when the worker answered the one before it)."""
        if not self._unsent:
            return
        data, group = b"".join(self._unsent), self._pending[-len(self._unsent):]
        self._unsent = []
        now = time.monotonic()
        for p in group:
            p.sent = now
        try:
            self.sock.settimeout(group[-1].seconds)
            self.sock.sendall(data)
        except TimeoutError:
            self._fail(group[-1], timed_out=True)
        except OSError:  # the worker is gone: a request sent before may have stopped it
            del self._pending[-len(group):]
            self._in_flight = sum(p.size for p in self._pending)
            try:
                if self._pending:
                    self._drain()  # their answers, then the end: the one that stopped it is named
            except GradingError:
                _abandon(group, self.broken or WorkerDied("the notebook's process stopped"))
                raise
            self._pending = group  # _fail names the first, and fails the others' results
            self._fail(group[0], timed_out=False)

    def _drain(self, waited: bool = False, upto: Later | None = None) -> Any:
        """Read the answers to every request sent (``upto``: up to that result's), in order;
        return the last one's result. Raise the first error of a request without a
        ``Later`` (one with a ``Later`` gets its own error; those after a failure in their
        chain were skipped and get the failure). ``waited``: the last request is the one a
        check waits for; an error that is not its own (a posted request's) is raised as
        :class:`Posted`."""
        self._flush()
        ends = [i + 1 for i, p in enumerate(self._pending) if upto is not None and p.later is upto]
        end = ends[0] if ends else len(self._pending)
        pending, self._pending = self._pending[:end], self._pending[end:]
        self._in_flight = sum(p.size for p in self._pending)
        self._chain += 1
        failed = self._failed  # each chain's failure: what its skipped requests get
        raised: Exception | None = None
        result: Any = None
        for i, p in enumerate(pending):
            try:
                reply, result = self._receive(p)
            except GradingError as exc:  # the worker hung, died or sent garbage: no more answers
                _abandon(pending[i:] + self._pending, exc)
                self._pending, self._in_flight = [], 0
                raise
            if reply.get("ok") is True:
                values.map_leaves(result, self._note_type)
                if p.later is not None:
                    p.later.set(self._wrap(result))
                continue
            skipped = reply.get("skipped") is True
            if skipped and p.chain in failed:
                error = failed[p.chain]
            elif skipped:
                self.broken = ProtocolError("a request was skipped with none failed before it")
                _abandon(pending[i:] + self._pending, self.broken)
                self._pending, self._in_flight = [], 0
                raise self.broken
            else:
                error = _error_from(reply.get("error"))
                if isinstance(error, MissingName):
                    error = self.explain_missing(error)
                failed.setdefault(p.chain, error)
            if p.later is not None:
                p.later.fail(error)
            elif raised is None:
                own = waited and p is pending[-1] and not skipped
                raised = error if own else Posted(error)
        if raised is not None:
            raise raised
        return result

    def _receive(self, p: _Pending) -> tuple[dict[str, Any], Any]:
        """The answer to ``p``: the worker started it when it had answered the one before,
        so ``p`` has its ``seconds`` from then (or from when it was sent)."""
        started = max(p.sent, self._answered)
        try:
            self.sock.settimeout(max(p.seconds - (time.monotonic() - started), 0.05))
            reply, result = self._answers.recv()
        except TimeoutError:
            self._fail(p, timed_out=True)
        except (EOFError, ConnectionError, BrokenPipeError, OSError):
            self._fail(p, timed_out=False)
        except ProtocolError as exc:
            self.broken = exc
            raise
        self._answered = time.monotonic()
        return reply, result

    def _fail(self, p: _Pending, timed_out: bool) -> NoReturn:
        named = p.op not in ("load", "shutdown")  # a check's request: name it if it fails
        if timed_out:
            self.broken = (CallHung(describe_request(p.op, p.header, p.value, self._types), p.seconds)
                           if named else WorkerTimeout(f"no answer within {p.seconds:g} s"))
        else:
            self.broken = (CallCrashed(describe_request(p.op, p.header, p.value, self._types))
                           if named else WorkerDied("the notebook's process stopped"))
        _abandon(self._pending, self.broken)
        self._pending, self._in_flight = [], 0
        raise self.broken from None

    def _note_type(self, value: Any) -> Any:
        if isinstance(value, values.HandleRef):
            self._types[value.id] = value.type_name
        return value

    def close(self) -> bool:
        """Ask the worker to shut down (unless it is broken); True when it answered, with
        its output ended (``grader.runtime.worker``)."""
        answered = False
        if self.broken is None:
            try:
                self._request("shutdown", {}, timeout=2.0)
                answered = True
            except Exception:  # noqa: BLE001 - the worker is killed afterwards anyway
                pass
        self.sock.close()
        return answered


def _abandon(pending: list[_Pending], error: Exception) -> None:
    """Requests that will get no answer: their results (a batch's, read later) raise ``error``."""
    for p in pending:
        if p.later is not None:
            p.later.fail(error)


def _error_from(error: Any) -> Exception:
    if not isinstance(error, dict):
        return ProtocolError("malformed error reply")
    kind = error.get("kind")
    if kind == "missing":
        return MissingName(str(error.get("name", "")))
    if kind == "submission":
        return SubmissionError(str(error.get("target", "")), str(error.get("type", "")),
                               str(error.get("message", ""))[:500], str(error.get("where", ""))[:2000])
    if kind == "bad_value":
        return BadValue(str(error.get("message", ""))[:300])
    return ProtocolError(f"the worker failed: {str(error.get('message', ''))[:300]}")
