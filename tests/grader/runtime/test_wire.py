"""grader.runtime.wire: the one channel of the grader's own processes (JSON lines with
passed file descriptors), on a SOCK_SEQPACKET pair and on a stream."""

from __future__ import annotations

import os
import socket
import time

import pytest

from grader.runtime import wire


@pytest.fixture(params=["pair", "stream"])
def ends(request):
    a, b = wire.pair() if request.param == "pair" else socket.socketpair()
    yield wire.Channel(a), wire.Channel(b)
    a.close()
    b.close()


def test_messages_keep_their_bounds_and_fds(ends) -> None:
    left, right = ends
    r, w = os.pipe()
    left.send({"op": "one", "text": "x\ny"})
    assert right.recv(5) == ({"op": "one", "text": "x\ny"}, [])
    left.send({"op": "two"}, [w])
    os.close(w)
    message, fds = right.recv(5)
    assert message == {"op": "two"} and len(fds) == 1
    os.write(fds[0], b"through")  # the same pipe, passed
    assert os.read(r, 16) == b"through"
    os.close(fds[0])
    os.close(r)


def test_several_lines_in_one_read_are_several_messages() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(wire.encode({"n": 1}) + wire.encode({"n": 2}))
        channel = wire.Channel(b)
        assert channel.recv(5)[0] == {"n": 1}
        assert channel.pending()
        assert channel.recv(0.01)[0] == {"n": 2}


def test_timeout_and_end(ends) -> None:
    left, right = ends
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        right.recv(0.2)
    assert time.monotonic() - began < 2
    left.close()
    assert right.recv(5) == (None, [])
    with pytest.raises(ConnectionError):
        right.call({"op": "x"}, 5)


def test_one_thread_each_keeps_what_the_user_set() -> None:
    env = {"OMP_NUM_THREADS": "4"}
    wire.one_thread_each(env)
    assert env == {**wire.one_thread_env(), "OMP_NUM_THREADS": "4"}


def test_warming_torch_up_leaves_no_trace(capfd: pytest.CaptureFixture[str]) -> None:
    """A spare worker warms torch up before its student's code runs: the random state, the
    grad mode and the output are as they were (a student's seeded draws stay theirs)."""
    import warnings

    import torch

    torch.manual_seed(7)
    state, grad_mode = torch.get_rng_state().clone(), torch.is_grad_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wire.warm_up_torch()
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.is_grad_enabled() == grad_mode
    assert capfd.readouterr() == ("", "")
