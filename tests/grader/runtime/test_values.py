"""The wire format between the grader and a worker: every value comes back equal, with
its dtype and shape, and owned by the receiver."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.runtime import protocol, values


def over_the_wire(value):
    """``value`` sent through a socket pair, as a worker's reply travels."""
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"ok": True}, value)
        _, received = protocol.recv(b)
    return received


TENSORS = {
    "float32": torch.randn(2, 3, 4),
    "float64": torch.randn(5, dtype=torch.float64),
    "float16": torch.randn(3, 3).half(),
    "bfloat16": torch.randn(3, 2).bfloat16(),  # numpy has no bfloat16: safetensors.torch writes it
    "int64": torch.arange(6).reshape(2, 3),
    "int8": torch.tensor([-3, 0, 7], dtype=torch.int8),
    "uint8": torch.tensor([0, 255], dtype=torch.uint8),
    "bool": torch.tensor([[True, False], [False, True]]),
    "complex64": torch.randn(3, dtype=torch.complex64),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 4),
    "transposed": torch.randn(3, 4).t(),
    "a slice that starts inside its storage": torch.arange(10.0)[3:7],
    "conjugated": torch.randn(3, dtype=torch.complex64).conj(),
    "negated view": torch.randn(3, dtype=torch.complex64).conj().imag,
}


@pytest.mark.parametrize("name", list(TENSORS))
def test_a_tensor_comes_back_equal(name: str) -> None:
    sent = TENSORS[name]
    got = over_the_wire({"x": sent, "mixed": [1, 2.0, "three", (sent,)]})
    for tensor in (got["x"], got["mixed"][3][0]):
        assert isinstance(tensor, torch.Tensor) and tensor.dtype == sent.dtype
        assert tensor.shape == sent.shape
        assert torch.equal(tensor.resolve_conj().resolve_neg(), sent.resolve_conj().resolve_neg())
    assert got["mixed"][:3] == [1, 2.0, "three"]


def test_a_state_dict_of_many_tensors_comes_back_in_order() -> None:
    state = torch.nn.Transformer(16, 2, 1, 1, 32, batch_first=True).state_dict()
    got = over_the_wire(state)
    assert list(got) == list(state)
    assert all(torch.equal(got[k], v) for k, v in state.items())


def test_what_comes_back_is_the_receivers_own() -> None:
    """The receiver gets writable copies, never views of the message's bytes (``unpack``
    does not copy, so ``decode_blobs`` must): a value decoded twice from one message is
    two independent values."""
    tree, arrays, tensors = values.pack([torch.ones(3), np.ones(2)])
    blobs = values.encode_blobs(arrays, tensors)
    first = values.unpack(tree, *values.decode_blobs(*blobs))
    second = values.unpack(tree, *values.decode_blobs(*blobs))
    first[0].add_(5)
    first[1] += 5  # a read-only array would raise here
    assert torch.equal(second[0], torch.ones(3)) and np.array_equal(second[1], np.ones(2))


def test_two_references_to_one_blob_entry_are_two_tensors() -> None:
    """``pack`` never sends one entry twice, but a hostile worker could: the grader must
    not get two names for one tensor."""
    _, arrays, tensors = values.pack([torch.zeros(2), np.zeros(2)])
    tree = [{"$pt": "t0"}, {"$pt": "t0"}, {"$nd": "a0"}, {"$nd": "a0"}]
    got = values.unpack(tree, *values.decode_blobs(*values.encode_blobs(arrays, tensors)))
    got[0].add_(1)
    got[2] += 1
    assert torch.equal(got[1], torch.zeros(2)) and np.array_equal(got[3], np.zeros(2))


ARRAYS = {
    "float64": np.linspace(0, 1, 6).reshape(2, 3),
    "float32": np.ones((2, 2), np.float32),
    "int64": np.arange(4),
    "bool": np.array([True, False]),
    "complex64": np.array([1 + 2j], np.complex64),
    "big-endian": np.arange(6, dtype=">f4").reshape(3, 2),  # the file is little-endian
    "empty": np.zeros((0, 3)),
    "transposed": np.arange(6.0).reshape(2, 3).T,
    "a slice that starts inside its buffer": np.arange(10.0)[3:7],
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_an_array_comes_back_equal(name: str) -> None:
    sent = ARRAYS[name]
    got = over_the_wire([sent])[0]
    assert isinstance(got, np.ndarray) and got.shape == sent.shape
    assert got.dtype == sent.dtype.newbyteorder("=") and np.array_equal(got, sent)
    assert got.flags.writeable  # the receiver's own


@pytest.mark.parametrize("value", [np.zeros(2, np.complex128), torch.zeros(2, dtype=torch.complex128)],
                         ids=["array", "tensor"])
def test_a_dtype_safetensors_does_not_store_is_a_bad_value(value) -> None:
    """Not a crash of the sender: the worker answers with an error naming the dtype."""
    with pytest.raises(values.BadValue, match="complex128"):
        protocol.encode({"ok": True}, [value])


def frame(header: bytes, np_blob: bytes = b"", pt_blob: bytes = b"") -> bytes:
    return protocol._LENGTHS.pack(len(header), len(np_blob), len(pt_blob)) + header + np_blob + pt_blob


def good_blob() -> bytes:
    return values.encode_blobs({}, {"t0": torch.ones(2, 3)})[1]


MALFORMED = {
    "not json": frame(b"{nope"),
    "not an object": frame(b"[1, 2]"),
    "header too large": protocol._LENGTHS.pack(protocol.MAX_HEADER + 1, 0, 0),
    "blob too large": protocol._LENGTHS.pack(2, protocol.MAX_BLOB + 1, 0) + b"{}",
    "blob not safetensors": frame(b'{"value": {"$pt": "t0"}}', b"", b"\x07" * 40),
    "tensor shape and data disagree": frame(
        b'{"value": {"$pt": "t0"}}', b"", good_blob().replace(b"[2,3]", b"[4,3]")),
    "name not in the blob": frame(b'{"value": {"$pt": "t9"}}', b"", good_blob()),
    "unknown tag": frame(b'{"value": {"$eval": "1"}}'),
}


READERS = {"recv": protocol.recv, "Reader": lambda sock: protocol.Reader(sock).recv()}


@pytest.mark.parametrize("read", list(READERS))
@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_message_is_a_protocol_error(name: str, read: str) -> None:
    """What a hostile worker could send: a clear ProtocolError, never another exception."""
    a, b = socket.socketpair()
    with a, b:
        a.sendall(MALFORMED[name])
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(protocol.ProtocolError):  # each message is whole: never an EOF
            READERS[read](b)


@pytest.mark.parametrize("read", list(READERS))
def test_a_message_cut_short_is_the_end_of_the_connection(read: str) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(protocol.encode({"ok": True}, torch.ones(3))[:-5])
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            READERS[read](b)


def test_messages_written_together_are_read_one_by_one() -> None:
    """The reader's chunks hold several messages, or part of one larger than a chunk."""
    big = torch.arange(3 * protocol.Reader.CHUNK, dtype=torch.float64)  # 24 chunks' worth
    sent = [({"n": 0}, 1.5), ({"n": 1}, big), ({"n": 2}, [np.ones(2), "x"]), ({"n": 3}, None)]
    a, b = socket.socketpair()
    with a, b:
        data = b"".join(protocol.encode(head, value) for head, value in sent)
        writer = threading.Thread(target=a.sendall, args=(data,))  # more than a socket holds
        writer.start()
        reader = protocol.Reader(b)
        got = [reader.recv() for _ in sent]
        writer.join()
        assert [head["n"] for head, _ in got] == [0, 1, 2, 3]
        assert got[0][1] == 1.5 and torch.equal(got[1][1], big) and got[3][1] is None
        np.testing.assert_array_equal(got[2][1][0], np.ones(2))
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            reader.recv()


def test_a_tensor_arrives_in_a_process_that_has_not_imported_torch() -> None:
    """The grader of a numpy lesson has no torch until a student returns a tensor."""
    import subprocess
    import sys

    message = protocol.encode({"ok": True}, [torch.arange(3.0), np.ones(2)])
    script = ("import sys; from grader.runtime import protocol\n"
              "assert 'torch' not in sys.modules\n"
              "import socket; a, b = socket.socketpair(); a.sendall(sys.stdin.buffer.read())\n"
              "_, got = protocol.recv(b); print(type(got[0]).__name__, got[0].tolist(), got[1].tolist())")
    out = subprocess.run([sys.executable, "-c", script], input=message, capture_output=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.decode().split() == ["Tensor", "[0.0,", "1.0,", "2.0]", "[1.0,", "1.0]"]
