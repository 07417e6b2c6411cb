"""Framing of messages between the grader and a worker over a stream socket.

A message is a JSON header plus a value: ``u32 header length | header | u64 numpy blob
length | numpy blob | u64 torch blob length | torch blob``. The blobs are safetensors
files; nothing is ever pickled.
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


def encode(header: dict[str, Any], value: Any = None) -> bytes:
    """One message, framed (what :func:`send` writes)."""
    tree, arrays, tensors = values.pack(value)
    head = values.dumps(dict(header, value=tree))
    np_blob, pt_blob = values.encode_blobs(arrays, tensors)
    return (struct.pack(">I", len(head)) + head
            + struct.pack(">Q", len(np_blob)) + np_blob
            + struct.pack(">Q", len(pt_blob)) + pt_blob)


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
    (head_len,) = struct.unpack(">I", _recv_exact(sock, 4))
    if head_len > MAX_HEADER:
        raise ProtocolError("header too large")
    try:
        header = json.loads(_recv_exact(sock, head_len))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"bad header ({exc})") from None
    blobs = []
    for _ in range(2):
        (blob_len,) = struct.unpack(">Q", _recv_exact(sock, 8))
        if blob_len > MAX_BLOB:
            raise ProtocolError("value too large")
        blobs.append(_recv_exact(sock, blob_len))
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    try:
        arrays, tensors = values.decode_blobs(*blobs)
        value = values.unpack(header.pop("value", None), arrays, tensors)
    except BadValue as exc:
        raise ProtocolError(str(exc)) from None
    except Exception as exc:  # safetensors raises its own error types on garbage
        raise ProtocolError(f"bad tensor data ({type(exc).__name__})") from None
    return header, value
