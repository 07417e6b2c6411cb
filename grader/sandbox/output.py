"""Drains a worker's stdout/stderr pipe, keeping only a bounded head and tail."""

from __future__ import annotations

import os
import threading


class OutputTap:
    """Reads ``fd`` until EOF in a daemon thread; memory stays bounded by ``2 * keep``."""

    def __init__(self, fd: int, keep: int = 64 << 10) -> None:
        self._fd = fd
        self._keep = keep
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"sandbox-output-{fd}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self._fd, 1 << 16):
                with self._lock:
                    self._add(chunk)
        except OSError:
            pass
        finally:
            os.close(self._fd)

    def _add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._keep - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - self._keep)]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def ended(self) -> bool:
        """EOF was read: every holder of the pipe closed it."""
        return not self._thread.is_alive()

    def excerpt(self, max_chars: int = 2000) -> str:
        with self._lock:
            head = self._head.decode("utf-8", "replace")
            tail = self._tail.decode("utf-8", "replace")
            total = self.total
        if len(head) + len(tail) <= max_chars:
            return head + tail
        half = max(max_chars // 2, 1)
        omitted = total - len(head[:half].encode()) - len(tail[-half:].encode())
        return f"{head[:half]}\n[... {omitted} bytes omitted ...]\n{tail[-half:]}"
