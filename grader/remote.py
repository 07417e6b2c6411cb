"""A submission running in a worker process, reached over a socket."""

from __future__ import annotations

import socket
import time
from typing import Any

from . import timeline
from .calls import describe_request
from .limits import DEFAULT_LIMITS
from .runtime import protocol, values
from .runtime.errors import (
    BadValue,
    CallCrashed,
    CallHung,
    MissingName,
    ProtocolError,
    SubmissionError,
    WorkerDied,
    WorkerTimeout,
)
from .submission import Submission


class RemoteSubmission(Submission):
    """Talks to ``grader.runtime.worker.serve`` on the other end of ``sock``.

    Once the worker times out, dies or sends garbage, every later request fails at once
    with the same error, so the remaining checks fail fast instead of waiting. A request
    that hangs or kills the worker raises ``CallHung`` / ``CallCrashed``, which name it
    (function and argument shapes, never the values: ``grader.calls``).
    """

    def __init__(self, sock: socket.socket, call_timeout: float = DEFAULT_LIMITS.call_s):
        self.sock = sock
        self.call_timeout = call_timeout
        self.broken: Exception | None = None
        self._types: dict[int, str] = {}  # handle id -> type name, to name a hung method

    def load(self, cells: list[tuple[int, str]], timeout: float) -> dict[str, Any]:
        start = time.time()
        reply = self._request("load", {}, {"cells": [list(c) for c in cells]}, timeout=timeout)
        self.note_load(cells, reply)
        timeline.add("load", start, end := time.time())
        seconds = reply.get("seconds") if isinstance(reply, dict) else None
        if type(seconds) is float and 0 <= seconds <= end - start:  # the worker's own word
            timeline.add("cells", end - seconds, end)
        return reply

    def _request(self, op: str, header: dict[str, Any], value: Any = None,
                 timeout: float | None = None) -> Any:
        if self.broken is not None:
            raise self.broken
        seconds = timeout or self.call_timeout
        named = op not in ("load", "shutdown")  # a check's request: name it if it fails
        try:
            self.sock.settimeout(seconds)
            protocol.send(self.sock, dict(header, op=op), value)
            reply, result = protocol.recv(self.sock)
        except TimeoutError:
            self.broken = (CallHung(describe_request(op, header, value, self._types), seconds)
                           if named else WorkerTimeout(f"no answer within {seconds:g} s"))
            raise self.broken from None
        except (EOFError, ConnectionError, BrokenPipeError, OSError):
            self.broken = (CallCrashed(describe_request(op, header, value, self._types))
                           if named else WorkerDied("the notebook's process stopped"))
            raise self.broken from None
        except ProtocolError as exc:
            self.broken = exc
            raise
        if reply.get("ok") is True:
            values.map_leaves(result, self._note_type)
            return result
        error = _error_from(reply.get("error"))
        raise self.explain_missing(error) if isinstance(error, MissingName) else error

    def _note_type(self, value: Any) -> Any:
        if isinstance(value, values.HandleRef):
            self._types[value.id] = value.type_name
        return value

    def close(self) -> None:
        if self.broken is None:
            try:
                self._request("shutdown", {}, timeout=2.0)
            except Exception:  # noqa: BLE001 - the worker is killed afterwards anyway
                pass
        self.sock.close()


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
