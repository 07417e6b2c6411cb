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
    """Read one message; returns ``(header, value)``. Raises EOFError or ProtocolError."""
    head_len, np_len, pt_len = _LENGTHS.unpack(_recv_exact(sock, _LENGTHS.size))
    if head_len > MAX_HEADER:
        raise ProtocolError("header too large")
    if np_len > MAX_BLOB or pt_len > MAX_BLOB:
        raise ProtocolError("value too large")
    body = _recv_exact(sock, head_len + np_len + pt_len)
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
