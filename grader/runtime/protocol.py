"""Framing of messages between the grader and a worker over a stream socket.

A message is a JSON header plus a value: ``u32 header length | u64 numpy blob length |
u64 torch blob length | header | numpy blob | torch blob``, the lengths first so that a
message takes two reads. The blobs are safetensors files; nothing is ever pickled.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from . import values
from .errors import BadValue, ProtocolError

MAX_HEADER = 16 << 20
MAX_BLOB = 512 << 20
_LENGTHS = struct.Struct(">IQQ")  # header, numpy blob, torch blob


def encode(header: dict[str, Any], value: Any = None) -> bytes:
    """One message, framed (what :func:`send` writes)."""
    tree, arrays, tensors = values.pack(value)
    head = values.dumps(dict(header, value=tree))
    np_blob, pt_blob = values.encode_blobs(arrays, tensors)
    return b"".join((_LENGTHS.pack(len(head), len(np_blob), len(pt_blob)), head, np_blob, pt_blob))


def send(sock: socket.socket, header: dict[str, Any], value: Any = None) -> None:
    sock.sendall(encode(header, value))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> tuple[dict[str, Any], Any]:
    """Read one message, and not a byte more; returns ``(header, value)``. Raises EOFError
    or ProtocolError. (:class:`Reader` reads a stream of them.)"""
    head_len, np_len, pt_len = _lengths(_recv_exact(sock, _LENGTHS.size))
    first = _header_start(_recv_exact(sock, 1))
    return _decode(first + _recv_exact(sock, head_len - 1 + np_len + pt_len), head_len, np_len)


class Reader:
    """The messages of one socket, read in chunks: those that are there already (a batch's
    answers, requests sent together) cost no system call each. Only this reader may read
    the socket from its first message on; a timeout set on the socket applies to each read."""

    CHUNK = 1 << 16

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = bytearray()

    def recv(self) -> tuple[dict[str, Any], Any]:
        """The next message, as :func:`recv`."""
        self._fill(_LENGTHS.size)
        head_len, np_len, pt_len = _lengths(bytes(self._buf[:_LENGTHS.size]))
        self._fill(_LENGTHS.size + 1)
        _header_start(bytes(self._buf[_LENGTHS.size:_LENGTHS.size + 1]))
        end = _LENGTHS.size + head_len + np_len + pt_len
        self._fill(end)
        body = bytes(self._buf[_LENGTHS.size:end])
        del self._buf[:end]
        return _decode(body, head_len, np_len)

    @property
    def buffered(self) -> int:
        """Bytes read from the socket that no message returned yet has taken."""
        return len(self._buf)

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(self.CHUNK, min(n - len(self._buf), 1 << 20)))
            if not chunk:
                raise EOFError("connection closed")
            self._buf += chunk


def _lengths(prefix: bytes) -> tuple[int, int, int]:
    head_len, np_len, pt_len = _LENGTHS.unpack(prefix)
    if head_len > MAX_HEADER:
        raise ProtocolError("header too large")
    if head_len < 2:  # "{}" at least
        raise ProtocolError("header too short")
    if np_len > MAX_BLOB or pt_len > MAX_BLOB:
        raise ProtocolError("value too large")
    return head_len, np_len, pt_len


def _header_start(first: bytes) -> bytes:
    """The first byte of a header, which opens a JSON object: anything else is garbage
    (bytes a notebook wrote to a descriptor it does not own), told at once instead of
    after waiting for the bytes its made-up lengths announce."""
    if first != b"{":
        raise ProtocolError("garbage where a message should start")
    return first


def _decode(body: bytes, head_len: int, np_len: int) -> tuple[dict[str, Any], Any]:
    try:
        header = json.loads(body[:head_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"bad header ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    try:
        arrays, tensors = values.decode_blobs(body[head_len:head_len + np_len],
                                              body[head_len + np_len:])
        value = values.unpack(header.pop("value", None), arrays, tensors)
    except BadValue as exc:
        raise ProtocolError(str(exc)) from None
    except Exception as exc:  # safetensors raises its own error types on garbage
        raise ProtocolError(f"bad tensor data ({type(exc).__name__})") from None
    return header, value
