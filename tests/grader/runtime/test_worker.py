"""grader.runtime.worker: what a worker does around the requests it answers."""

from __future__ import annotations

from grader.check.launch import LocalWorker
from grader.check.remote import RemoteSubmission
from grader.common.limits import DEFAULT_LIMITS

NOTEBOOK = """
import gc, weakref

def frozen():
    return gc.get_freeze_count()

class Node:
    pass

def a_cycle_is_collected():
    node = Node()
    node.self = node
    seen = weakref.ref(node)
    del node
    gc.collect()
    return seen() is None
"""


def test_the_notebooks_objects_are_frozen_once_loaded_and_later_cycles_still_collected() -> None:
    """A full garbage collection scans every object the notebook made (and torch): the
    worker freezes them once the notebook has run (``gc.freeze``), so that no request
    pays for such a collection; what a request makes is collected as before."""
    worker = LocalWorker(DEFAULT_LIMITS)
    remote = RemoteSubmission(worker.sock, call_timeout=10.0)
    try:
        remote.load([(0, NOTEBOOK)], timeout=60)
        assert remote.call("frozen") > 100
        assert remote.call("a_cycle_is_collected") is True
    finally:
        remote.close()
        worker.kill()
        worker.finish()
