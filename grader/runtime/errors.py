"""Exceptions shared by the trusted side and the code that runs next to the submission."""

import os
import sys
from typing import NoReturn


class GradingError(Exception):
    """Base class: something about the submission made a check impossible."""


class MissingName(GradingError):
    """The notebook does not define a name the grader needs."""

    def __init__(self, name: str, cause: str = ""):
        super().__init__(name)
        self.name = name
        self.cause = cause  # the error of the notebook's cell that defines it, if one failed


class SubmissionError(GradingError):
    """The student's code raised an exception while the grader called it."""

    def __init__(self, target: str, exc_type: str, message: str, where: str = ""):
        super().__init__(f"{exc_type}: {message}")
        self.target = target
        self.exc_type = exc_type
        self.message = message
        self.where = where


#: the prefix of a ``ForbiddenCall`` name for code the notebook gives, not a library's
#: (``Target.refuse``): ``given:block_forward``
GIVEN = "given:"


class ForbiddenCall(Exception):
    """Raised inside student code when it calls a library function the exercise teaches, or
    code the notebook gives that computes the exercise (its name then starts with ``GIVEN``)."""

    def __init__(self, name: str):
        super().__init__(f"uses {name}")
        self.name = name


class BadValue(GradingError):
    """The submission returned something that is not an array, tensor or plain value."""


class WorkerDied(GradingError):
    """The process running the submission stopped (crash, exit, out of memory)."""


class WorkerOutOfMemory(WorkerDied):
    """The process running the submission reached its memory limit (``gib``): a cgroup's
    OOM killer stopped it, or it ended itself (``MEMORY_EXIT``) at a failed allocation."""

    def __init__(self, gib: float):
        super().__init__(f"the notebook reached its memory limit ({gib:g} GiB)")
        self.gib = gib


class WorkerTimeout(GradingError):
    """The submission did not answer within its time budget."""


class ProtocolError(GradingError):
    """A malformed message came back from the worker."""


class CallHung(WorkerTimeout):
    """One request of a check (``call``, described without its values: text or a
    :class:`grader.i18n.Message`) got no answer."""

    def __init__(self, call: object, seconds: float):
        super().__init__(f"{call!s} gave no answer within {seconds:g} s")
        self.call = call
        self.seconds = seconds


class CallCrashed(WorkerDied):
    """The worker stopped while it answered one request of a check (``call``)."""

    def __init__(self, call: object):
        super().__init__(f"the notebook's process stopped during {call!s}")
        self.call = call


#: The exit status of a worker that reached its memory limit: the trusted side reads it as
#: ``memory``, as it reads a worker that a cgroup's OOM killer stopped (see ``out_of_memory``).
MEMORY_EXIT = 75

#: What an allocator says when it may not have more (torch's CPU allocator raises a
#: RuntimeError; ``ENOMEM``'s own words in an OSError or a library's message).
_ALLOCATION_FAILED = ("can't allocate memory", "cannot allocate memory", "out of memory")


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, says that the process
    reached its memory limit (``RLIMIT_DATA`` where no cgroup caps the submission): a
    ``MemoryError`` (numpy's included), or an allocator's failure."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, MemoryError):
            return True
        if isinstance(exc, RuntimeError | OSError) and \
                any(words in str(exc).lower() for words in _ALLOCATION_FAILED):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def exit_out_of_memory() -> NoReturn:
    """End this worker at once, as one that reached its memory limit (``MEMORY_EXIT``):
    whatever it was doing, the grader then treats the notebook the same way, on every run
    and whichever mechanism (cgroup or rlimit) enforced the limit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001, S110 - no memory left even for that
            pass
    os._exit(MEMORY_EXIT)
