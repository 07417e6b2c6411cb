"""Exceptions shared by the trusted side and the code that runs next to the submission."""


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


class WorkerTimeout(GradingError):
    """The submission did not answer within its time budget."""


class ProtocolError(GradingError):
    """A malformed message came back from the worker."""


class CallHung(WorkerTimeout):
    """One request of a check (``call``, described without its values) got no answer."""

    def __init__(self, call: str, seconds: float):
        super().__init__(f"{call} gave no answer within {seconds:g} s")
        self.call = call
        self.seconds = seconds


class CallCrashed(WorkerDied):
    """The worker stopped while it answered one request of a check (``call``)."""

    def __init__(self, call: str):
        super().__init__(f"the notebook's process stopped during {call}")
        self.call = call
