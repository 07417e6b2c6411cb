"""Requests that travel together (issue 29): posted requests and ``Submission.batch()``.

A worker's submission sends them without waiting and reads their answers together; a
check must still see what it would have seen call by call: the results in order, the
calls run in order and none after a failure, each call with its own time limit, a hung or
crashing call named, and the in-process submission behaving the same.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest

from grader.check.launch import LocalWorker
from grader.check.messages import explain
from grader.check.remote import RemoteSubmission
from grader.common.limits import DEFAULT_LIMITS
from grader.runtime.errors import CallCrashed, CallHung, ProtocolError, SubmissionError
from grader.testkit.submission import InProcessSubmission, Posted, Submission

NOTEBOOK = """
import os, time
import numpy as np
log = []

def f(x):
    log.append(x)
    if x == "hang":
        while True:
            pass
    if x == "crash":
        os._exit(3)
    if x == "fail":
        raise ValueError("no")
    if x == "slow":
        time.sleep(0.6)
    return x

def get_log():
    return list(log)

def echo(a):
    return a

def model():
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    net.register_buffer("steps", torch.zeros(4))
    return net

class Counter:
    def __init__(self, start=0):
        if start == "fail":
            raise ValueError("bad start")
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

def plain():
    return 3

class M:
    def eval(self):
        raise ValueError("eval failed")

    def train(self, mode=True):
        log.append("train")
        return self
"""


@contextlib.contextmanager
def _worker() -> Iterator[RemoteSubmission]:
    worker = LocalWorker(DEFAULT_LIMITS)
    remote = RemoteSubmission(worker.sock, call_timeout=1.0)
    try:
        remote.load([(0, NOTEBOOK)], timeout=60)
        yield remote
    finally:
        remote.close()
        worker.kill()
        worker.finish()


@pytest.fixture(params=["remote", "in process"])
def sub(request: pytest.FixtureRequest) -> Iterator[Submission]:
    if request.param == "in process":
        local = InProcessSubmission()
        local.load([(0, NOTEBOOK)])
        yield local
        return
    with _worker() as remote:
        yield remote


@pytest.fixture
def remote() -> Iterator[RemoteSubmission]:
    with _worker() as worker_sub:
        yield worker_sub


def _counted_waits(sub: Submission) -> list[int]:
    """A list that grows by one each time a worker's submission waits for answers."""
    waits: list[int] = []
    if isinstance(sub, RemoteSubmission):
        drain = sub._drain
        sub._drain = lambda waited=False: waits.append(1) or drain(waited)  # type: ignore[method-assign]
    return waits


def test_a_batch_gives_results_in_order_in_one_round_trip(sub: Submission) -> None:
    waits = _counted_waits(sub)
    with sub.batch() as b:
        got = [b.call("f", i) for i in range(5)]
    assert [r.value for r in got] == list(range(5))
    assert waits == ([1] if isinstance(sub, RemoteSubmission) else [])
    assert sub.call("get_log") == list(range(5))


def test_a_failure_in_the_middle_stops_the_calls_after_it(sub: Submission) -> None:
    with sub.batch() as b:
        first, failing, after = b.call("f", 1), b.call("f", "fail"), b.call("f", 2)
    assert first.value == 1
    with pytest.raises(SubmissionError, match="no") as raised:
        failing.value  # noqa: B018 - reading raises
    with pytest.raises(SubmissionError) as skipped:
        after.value  # noqa: B018
    assert skipped.value is raised.value
    assert sub.call("get_log") == [1, "fail"]  # f(2) never ran; the next request did


def _own(exc: BaseException) -> BaseException:
    """The error itself: a posted operation's comes wrapped in ``Posted``."""
    return exc.error if isinstance(exc, Posted) else exc


def test_a_posted_request_that_fails_is_raised_by_the_next_and_stops_it(sub: Submission) -> None:
    m = sub.new("M")
    with pytest.raises((SubmissionError, Posted)) as raised:
        m.eval()  # posted: M.eval raises (in process: at once)
        sub.call("f", 1)
    assert isinstance(_own(raised.value), SubmissionError)
    assert "eval failed" in str(_own(raised.value))
    assert sub.call("get_log") == []


def test_a_posted_failure_is_not_taken_for_the_next_requests_own(sub: Submission) -> None:
    """A check's ``except SubmissionError`` around a request never catches an earlier
    posted operation's error: called one by one, that error came before the ``try``. Its
    hint is the error's own."""
    m = sub.new("M")
    with pytest.raises((SubmissionError, Posted)) as raised:
        m.eval()
        try:
            sub.call("f", "fail")
        except SubmissionError:
            pytest.fail("the posted eval()'s error was caught as f's own")
    own = _own(raised.value)
    assert explain(raised.value, "M") == explain(own, "M")
    assert "eval failed" in str(explain(raised.value, "M").text)


def test_a_posted_failure_wins_over_what_the_check_raised_after_it(sub: Submission) -> None:
    m = sub.new("M")
    with pytest.raises((SubmissionError, Posted)) as raised, sub.settled():
        m.eval()
        raise AssertionError("a check after it")
    assert "eval failed" in str(_own(raised.value))


def test_posted_requests_run_in_order(sub: Submission) -> None:
    m = sub.new("M")
    m.train()
    sub.call("f", 1)
    m.train()
    sub.settle()
    assert sub.call("get_log") == ["train", 1, "train"]


def test_each_call_of_a_batch_has_its_own_time_limit(remote: RemoteSubmission) -> None:
    with remote.batch() as b:
        got = [b.call("f", "slow") for _ in range(3)]  # 1.8 s in all, 0.6 s each: limit 1 s
    assert [r.value for r in got] == ["slow"] * 3


def test_a_hung_call_in_a_batch_is_named(remote: RemoteSubmission) -> None:
    with pytest.raises(CallHung) as hung, remote.batch() as b:
        b.call("f", 1)
        b.call("f", "hang")
        b.call("f", 2)
    assert hung.value.call == "f('hang')"
    with pytest.raises(CallHung):
        remote.call("get_log")


def test_a_crash_in_a_batch_is_named(remote: RemoteSubmission) -> None:
    with pytest.raises(CallCrashed) as crashed, remote.batch() as b:
        b.call("f", 1)
        b.call("f", "crash")
        b.call("f", 2)
    assert crashed.value.call == "f('crash')"


def test_a_call_sent_after_a_crash_names_the_call_that_crashed(remote: RemoteSubmission) -> None:
    """The worker is gone when the next call is sent: the crash is still the crashing call's."""
    with pytest.raises(CallCrashed) as crashed:
        with remote.batch(lazy=True) as b:  # sent as the block ends, not read
            b.call("f", 1)
            b.call("f", "crash")
        time.sleep(1.0)  # the worker runs both and exits before f(2) is sent
        with remote.batch() as b:
            b.call("f", 2)
    assert crashed.value.call == "f('crash')"


class _Writes:
    """A socket whose writes are counted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.writes = sock, 0

    def sendall(self, data: bytes) -> None:
        self.writes += 1
        self.sock.sendall(data)

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


def test_a_batchs_calls_are_written_together(remote: RemoteSubmission) -> None:
    """A batch's first call is written at once (the worker runs it while the next are
    encoded), the next ones SEND_TOGETHER at a time (one wake-up for them, not one a
    call); a request that waits, and the end of a lazy batch, write what is pending."""
    from grader.check.remote import SEND_TOGETHER

    counted = _Writes(remote.sock)
    remote.sock = counted  # type: ignore[assignment]
    n = 2 * SEND_TOGETHER + 3
    with remote.batch() as b:
        got = [b.call("echo", i) for i in range(n)]
    assert [r.value for r in got] == list(range(n)) and counted.writes == 4  # 1, 32, 32, 2
    with remote.batch(lazy=True) as b:
        first = b.call("f", "slow")
        assert counted.writes == 5
        second = b.call("f", "slow")
        assert counted.writes == 5
    assert counted.writes == 6  # written as the block ends: it runs while the check goes on
    time.sleep(1.3)
    started = time.monotonic()
    assert first.value == second.value == "slow" and time.monotonic() - started < 0.3
    assert remote.call("echo", 5) == 5 and counted.writes == 7


def test_large_batches_do_not_block_both_ends(remote: RemoteSubmission) -> None:
    big = np.arange(300_000, dtype=np.float64)  # 2.4 MB each way per call
    with remote.batch() as b:
        got = [b.call("echo", big + i) for i in range(4)]
    for i, r in enumerate(got):
        np.testing.assert_array_equal(r.value, big + i)


def test_inspect_without_values_gives_each_tensor_as_its_shape(sub: Submission) -> None:
    """``inspect(values=False)``: the same names, shapes in place of the tensors."""
    if isinstance(sub, RemoteSubmission):
        sub.call_timeout = 60.0  # the worker imports torch first
    net = sub.call("model")
    full, light = net.inspect(), net.inspect(values=False)
    with sub.batch() as b:
        batched = b.inspect(net, values=False)
    assert batched.value == light
    for kind in ("parameters", "buffers"):
        assert list(light[kind]) == list(full[kind])
        assert all(light[kind][k] == list(v.shape) for k, v in full[kind].items())
    assert light["parameters"]["0.weight"] == [2, 3] and light["buffers"] == {"steps": [4]}
    assert {k: v for k, v in light.items() if k not in ("parameters", "buffers")} == \
        {k: v for k, v in full.items() if k not in ("parameters", "buffers")}


def test_an_object_built_in_a_batch_is_used_in_it_in_one_round_trip(sub: Submission) -> None:
    waits = _counted_waits(sub)
    with sub.batch() as b:
        made = b.new("Counter", 5)
        sums = [b.method(made.handle, "add", k) for k in (1, 2)]
        other = b.new("Counter")
    assert made.value is made.handle and made.value.type_name.endswith("Counter")
    assert [s.value for s in sums] == [6, 8]
    assert other.value.ref.id != made.value.ref.id
    assert waits == ([1] if isinstance(sub, RemoteSubmission) else [])
    assert made.handle.method("add", 0) == 8 and other.value.method("add", 1) == 1


def test_a_constructor_that_fails_in_a_batch_stops_the_calls_on_its_object(sub: Submission) -> None:
    with sub.batch() as b:
        made = b.new("Counter", "fail")
        after = b.method(made.handle, "add", 1)
    with pytest.raises(SubmissionError, match="bad start") as raised:
        made.value  # noqa: B018 - reading raises
    with pytest.raises(SubmissionError) as skipped:
        after.value  # noqa: B018
    assert skipped.value is raised.value


def test_a_batch_constructor_that_builds_no_object_says_so(sub: Submission) -> None:
    with sub.batch() as b:
        made = b.new("plain")
    with pytest.raises(ProtocolError, match="did not build an object"):
        made.value  # noqa: B018


def test_a_lazy_batch_is_read_when_used_and_run_before(sub: Submission) -> None:
    """The calls go out when the block ends; their answers wait until a result is read."""
    with sub.batch(lazy=True) as b:
        got = [b.call("f", i) for i in range(3)]
    if isinstance(sub, RemoteSubmission):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the worker answers while the check goes on
            with contextlib.suppress(BlockingIOError):
                if sub.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                    break
            time.sleep(0.01)
        assert sub._pending, "nothing was read before a result was used"
    assert [r.value for r in got] == [0, 1, 2]
    assert sub.call("get_log") == [0, 1, 2]


def test_a_failure_in_one_lazy_batch_does_not_stop_the_next(sub: Submission) -> None:
    with sub.batch(lazy=True) as b:
        failing, skipped = b.call("f", "fail"), b.call("f", 1)
    with sub.batch(lazy=True) as b:
        ran, own, after = b.call("f", 2), b.call("f", "fail"), b.call("f", 3)
    assert ran.value == 2
    with pytest.raises(SubmissionError) as first:
        failing.value  # noqa: B018
    with pytest.raises(SubmissionError) as second:
        own.value  # noqa: B018
    assert second.value is not first.value
    with pytest.raises(SubmissionError) as stopped:
        skipped.value  # noqa: B018
    assert stopped.value is first.value
    with pytest.raises(SubmissionError) as stopped:
        after.value  # noqa: B018
    assert stopped.value is second.value
    assert sub.call("get_log") == ["fail", 2, "fail"]


def test_a_hung_call_of_a_lazy_batch_is_named_where_it_is_read(remote: RemoteSubmission) -> None:
    with remote.batch(lazy=True) as b:
        first, hung, after = b.call("f", 1), b.call("f", "hang"), b.call("f", 2)
    assert first.value == 1
    with pytest.raises(CallHung) as raised:
        hung.value  # noqa: B018
    assert raised.value.call == "f('hang')"
    with pytest.raises(CallHung):
        after.value  # noqa: B018
