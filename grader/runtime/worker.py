"""The worker: runs one student's notebook and answers the grader's requests.

Started by the trusted grader (a plain subprocess for ``grader check``, a sandboxed fork
for ``grader grade``) with one end of a stream socket. It returns only plain values.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
from typing import Any

from . import protocol
from .errors import BadValue, MissingName, SubmissionError, exit_out_of_memory, out_of_memory
from .execute import defer_imports
from .target import Target
from .wire import one_torch_thread


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MissingName):
        return {"kind": "missing", "name": exc.name}
    if isinstance(exc, SubmissionError):
        return {"kind": "submission", "target": exc.target, "type": exc.exc_type,
                "message": exc.message, "where": exc.where}
    if isinstance(exc, BadValue):
        return {"kind": "bad_value", "message": str(exc)}
    return {"kind": "internal", "type": type(exc).__name__, "message": str(exc)[:500]}


def _fresh_random_state() -> None:
    """A worker forked from a warm zygote starts with the zygote's numpy random state;
    draw a fresh one, as a new process would (Python's ``random`` reseeds itself at fork)."""
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()


def _end_output() -> None:
    """Flush what the notebook printed and close this process's end of its output (both
    point at /dev/null from here on): once the shutdown is answered, the grader has all of
    it without waiting for this process to exit."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001, S110 - a stream the notebook replaced or closed
            pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def serve(sock: socket.socket) -> None:
    """Answer requests until the grader says shutdown or closes the connection.

    Requests come in order and may be pipelined (sent before the answer to the one before):
    those of one ``chain`` (the grader's number for the requests it sent before it last
    waited) stop at the first that fails, as the grader's code would have; the rest of that
    chain are answered ``skipped`` without running."""
    _fresh_random_state()
    defer_imports()  # unless a warm zygote loaded them: plotting modules load only if used
    target = Target(on_out_of_memory=exit_out_of_memory)
    failed_chain: Any = None  # the chain whose request failed: the rest of it is skipped
    requests = protocol.Reader(sock)
    while True:
        try:
            header, value = requests.recv()
        except (EOFError, OSError):
            return
        if header.get("op") == "shutdown":
            _end_output()
            protocol.send(sock, {"ok": True})
            return
        chain = header.get("chain")
        if chain is not None and chain == failed_chain:
            protocol.send(sock, {"ok": False, "skipped": True})
            continue
        try:
            result = target.dispatch(header.get("op"), header, value)
            one_torch_thread()  # torch is only imported if the notebook did
            reply: dict[str, Any] = {"ok": True}
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a reply
            if out_of_memory(exc):  # the memory limit, reached in the grader's side of it
                exit_out_of_memory()
            result, reply = None, {"ok": False, "error": _error(exc)}
            failed_chain = chain
        if header.get("op") == "load":
            gc.freeze()  # the notebook's objects (and torch, imported by it or the zygote)
            # are never scanned again: a full collection of them costs a check tens of ms
        try:
            protocol.send(sock, reply, result)
        except BadValue as exc:
            protocol.send(sock, {"ok": False, "error": _error(exc)})
            failed_chain = chain
        except BaseException as exc:
            if out_of_memory(exc):  # no memory left to write the answer
                exit_out_of_memory()
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description="grading worker (started by the grader)")
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    sock = socket.socket(fileno=args.fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - a notebook must not read the grader's input
    serve(sock)
    sock.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
