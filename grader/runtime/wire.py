"""Messages between the grader's own processes: JSON lines, with file descriptors passed
alongside (SCM_RIGHTS), over a Unix socket pair; the one-thread settings every process
of a check or a class run uses; and how the grader's own commands exit. Standard library
only: the sandbox's zygote imports it."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import MutableMapping, Sequence
from typing import Any, NoReturn

MAX_FDS = 8  # descriptors one message may carry
_CHUNK = 1 << 20  # a SOCK_SEQPACKET message longer than one read would be cut short

#: The thread pools of OpenMP, MKL and OpenBLAS: one thread each. The graders' tensors are
#: small and the class grader runs several processes at once: extra threads only spin
#: against busy cores (up to 50x slower). Read when the library loads: set before torch.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def one_thread_env() -> dict[str, str]:
    """The variables of a new process's environment that give it one thread each."""
    return dict.fromkeys(THREAD_VARS, "1")


def one_thread_each(environ: MutableMapping[str, str] = os.environ) -> None:
    """One thread each in this process (and its children), unless the user set a value."""
    for var in THREAD_VARS:
        environ.setdefault(var, "1")


def one_torch_thread() -> None:
    """torch's own pool, where torch is already imported (a warm fork inherits it)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def warm_up_torch() -> None:
    """Run the torch code paths most gradings start with (an attention block's forward
    and backward at toy size) in a worker that waits to be handed out: a forked process
    pays the first time it takes a path (the pages it writes are copied, its caches are
    empty), and this way it pays before the student's code runs, not during it. The
    random number generator's state is left as it was; nothing else is kept."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    with torch.random.fork_rng(devices=[]):
        block = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        x = torch.randn(2, 5, 16, requires_grad=True)
        mask = torch.ones(5, 5, dtype=torch.bool).tril()
        out = block(x, src_mask=~mask)
        out = torch.softmax(out @ out.transpose(-2, -1) / 4.0, dim=-1).masked_fill(~mask, 0.0) @ out
        out.sum().backward()
        block.eval()
        with torch.no_grad():
            block(x)


def exit_now(code: int) -> NoReturn:
    """Exit once every thread but this one is done, without the interpreter's own clean-up:
    with torch imported, tearing down every module and object takes 0.5-0.9 s, which the
    user would wait for after the answer is printed. What a normal exit does that matters
    still happens: the atexit functions (temporary folders, logging) and the streams' flush.
    Where a thread that is not a daemon still runs, the normal exit waits for it."""
    if any(t is not threading.main_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


def pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair: SOCK_SEQPACKET (messages keep their bounds), else a stream (macOS
    has no SOCK_SEQPACKET for AF_UNIX); :class:`Channel` reads either."""
    kind = getattr(socket, "SOCK_SEQPACKET", None)
    if kind is not None:
        with contextlib.suppress(OSError):
            return socket.socketpair(socket.AF_UNIX, kind)
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Channel:
    """JSON messages (one per line) with optional file descriptors over a Unix socket.

    ``send`` may be called from several threads; ``call`` (send, then wait for the reply)
    holds the channel for its round trip. On a stream (no SOCK_SEQPACKET) descriptors come
    with the next whole message read: send them in a reply, which nothing else precedes."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()
        self._fds: list[int] = []
        self._send_lock = threading.Lock()
        self._call_lock = threading.Lock()

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = encode(message)
        with self._send_lock:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.sendall(data)

    def pending(self) -> bool:
        """A whole message is already read (``recv`` returns it without reading)."""
        return b"\n" in self._buffer

    def recv(self, timeout: float | None = None) -> tuple[dict[str, Any] | None, list[int]]:
        """The next message and the descriptors that came with it; ``(None, [])`` at EOF.
        Raises TimeoutError when none is whole within ``timeout`` s (None: wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.pending():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("no message")
            self.sock.settimeout(left)
            data, fds, _, _ = socket.recv_fds(self.sock, _CHUNK, MAX_FDS)
            self._fds += fds
            if not data:
                for fd in self._fds:
                    os.close(fd)
                self._fds = []
                return None, []
            self._buffer += data
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer[:] = rest
        fds, self._fds = self._fds, []
        message = json.loads(line)
        if not isinstance(message, dict):
            for fd in fds:
                os.close(fd)
            raise ValueError("a message that is not a JSON object")
        return message, fds

    def call(self, message: dict[str, Any], timeout: float | None, fds: Sequence[int] = ()
             ) -> tuple[dict[str, Any], list[int]]:
        """Send ``message`` (with ``fds``) and wait at most ``timeout`` s (None: until it
        comes) for the reply (TimeoutError); ConnectionError when the other end closed."""
        with self._call_lock:
            self.send(message, fds)
            reply, fds = self.recv(timeout)
        if reply is None:
            raise ConnectionError("the other end closed the channel")
        return reply, fds

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
