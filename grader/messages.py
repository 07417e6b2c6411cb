"""Turn what went wrong in a hidden check into a sentence for the student.

Only texts written for students leave this module: the message of a failed ``check``,
the student's own exception, or a fixed sentence. Never the hidden test's code.
"""

from __future__ import annotations

from .framework import Failed
from .runtime.errors import (
    BadValue,
    CallCrashed,
    CallHung,
    MissingName,
    ProtocolError,
    SubmissionError,
    WorkerDied,
    WorkerTimeout,
)

FORBIDDEN_HINT = {
    "torch.nn.functional.scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward": "nn.MultiheadAttention",
    "torch.nn.functional.layer_norm": "F.layer_norm / nn.LayerNorm",
    "torch.layer_norm": "torch.layer_norm",
    "torch.nn.functional.gelu": "F.gelu / nn.GELU",
}


def explain(exc: BaseException | None, exercise: str) -> str:
    if isinstance(exc, Failed):
        return str(exc) or f"`{exercise}` returned something that is not an array or tensor"
    if isinstance(exc, MissingName):
        return (f"`{exc.name}` is not defined: did you delete its cell, rename it, "
                f"or does an earlier cell fail?")
    if isinstance(exc, SubmissionError):
        if exc.exc_type == "ForbiddenCall":
            lib = FORBIDDEN_HINT.get(exc.message, exc.message)
            return (f"`{exercise}` calls {lib}; this exercise asks you to build that "
                    f"operation yourself")
        if exc.exc_type == "NotImplementedError":
            return f"`{exercise}` is not implemented yet (it raised NotImplementedError)"
        where = f" ({exc.where.strip().splitlines()[0].strip()})" if exc.where.strip() else ""
        return f"calling `{exc.target}` raised {exc.exc_type}: {exc.message}{where}"[:600]
    if isinstance(exc, BadValue):
        return f"`{exercise}` returned something the grader cannot read: {exc}"
    if isinstance(exc, CallHung):
        return (f"`{exc.call}` gave no answer within {exc.seconds:g} s: an infinite loop "
                f"(a loop whose condition never changes for these arguments?)")
    if isinstance(exc, CallCrashed):
        return (f"`{exc.call}` stopped the notebook's process (it crashed, exited or ran out "
                f"of memory)")
    if isinstance(exc, WorkerTimeout):
        return f"the notebook took too long ({exc}): an infinite loop?"
    if isinstance(exc, WorkerDied):
        return "the notebook's process stopped (it crashed, exited or ran out of memory)"
    if isinstance(exc, ProtocolError):
        return "the notebook's process sent back something unreadable"
    return f"a hidden check of `{exercise}` failed"
