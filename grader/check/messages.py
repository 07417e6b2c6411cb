"""Turn what went wrong in a hidden check into a sentence for the student.

Only texts written for students leave this module: the message of a failed ``check``,
the student's own exception, or a fixed sentence. Never the hidden test's code.
"""

from __future__ import annotations

from grader.check.framework import Failed
from grader.check.submission import Posted
from grader.hint import Hint
from grader.runtime.errors import (
    GIVEN,
    BadValue,
    CallCrashed,
    CallHung,
    MissingName,
    ProtocolError,
    SubmissionError,
    WorkerDied,
    WorkerOutOfMemory,
    WorkerTimeout,
)

LIBRARY_CALL = "library_call"  # the mistake ids every lesson shares: see explain()
CHANGES_ITS_INPUT = "changes_its_input"  # grader.runtime.unchanged
GIVEN_ANSWER = "given_answer"  # Target.refuse: the notebook's given code, called by the exercise
SHARED_MISTAKES = (LIBRARY_CALL, CHANGES_ITS_INPUT, GIVEN_ANSWER)
UNCHANGED_RULE = ("a function must leave what it is given as it was (the caller still needs it): "
                  "compute into a new array or tensor, `x = x - mean` rather than `x -= mean`, "
                  "and no `add_`, `masked_fill_` or `x[...] = ...` on an argument")

FORBIDDEN_HINT = {
    "torch.nn.functional.scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward": "nn.MultiheadAttention",
    "torch.nn.functional.layer_norm": "F.layer_norm / nn.LayerNorm",
    "torch.layer_norm": "torch.layer_norm",
    "torch.nn.functional.gelu": "F.gelu / nn.GELU",
    "torch.nn.functional.batch_norm": "F.batch_norm / nn.BatchNorm1d",
    "torch.nn.functional.group_norm": "F.group_norm / nn.GroupNorm",
    "torch.nn.functional.instance_norm": "F.instance_norm / nn.InstanceNorm1d",
    "torch.nn.functional.rms_norm": "F.rms_norm / nn.RMSNorm",
    "torch.nn.functional.softmax": "F.softmax",
    "torch.nn.functional.cross_entropy": "F.cross_entropy / nn.CrossEntropyLoss",
}


def fold(failures: list[Hint], lang: str = "en") -> list[Hint]:
    """The hints a student reads for one exercise, from every failed check's hint.

    Each diagnosed mistake is shown once, first (in the order the checks found them); the
    other failed checks are folded into a count after the first hint ("+5 related checks
    failed"): a diagnosis explains its symptoms, and fixing it is the next step. Without a
    diagnosis the first error (the notebook raised) or else the first symptom is shown.
    ``lang``: the language the failures are written in, which the count is written in too.
    """
    if not failures:
        return []
    diagnoses: dict[str | None, Hint] = {}
    for h in failures:
        if h.kind == "diagnosis":
            diagnoses.setdefault(h.mistake, h)
    if diagnoses:
        shown = list(diagnoses.values())
        folded = sum(1 for h in failures if not (h.kind == "diagnosis" and h.mistake in diagnoses))
    else:
        errors = [h for h in failures if h.kind == "error"]
        shown = [errors[0] if errors else failures[0]]
        folded = sum(1 for h in failures if h.text != shown[0].text)
    if folded:
        first = shown[0]
        note = f"+{folded} related check{'s' if folded > 1 else ''} failed"
        text = f"{first.text} ({note})"
        if lang != "en":  # the failures are translated already (i18n.localize): so is the count
            from grader.i18n import translate, with_detail

            text = with_detail(first.text, translate(note, lang), lang)
        shown[0] = first.with_text(text)
    return shown


def explain(exc: BaseException | None, exercise: str) -> Hint:
    """The sentence for one failed check, as a :class:`Hint`."""
    if isinstance(exc, Posted):  # an earlier operation's error, raised by a later request
        exc = exc.error
    if isinstance(exc, Failed):
        text = str(exc) or f"`{exercise}` returned something that is not an array or tensor"
        return Hint(text, exc.mistake)
    if isinstance(exc, SubmissionError) and exc.exc_type == "ForbiddenCall":
        given = exc.message.startswith(GIVEN)
        return Hint(_explain_error(exc, exercise), GIVEN_ANSWER if given else LIBRARY_CALL)
    if isinstance(exc, SubmissionError) and exc.exc_type == "ArgumentChanged":
        return Hint(_explain_error(exc, exercise), CHANGES_ITS_INPUT)
    return Hint(_explain_error(exc, exercise), None, "error")


def _explain_error(exc: BaseException | None, exercise: str) -> str:
    if isinstance(exc, MissingName) and exc.cause:
        return (f"`{exc.name}` is not defined: its cell failed with {exc.cause}, so nothing "
                f"in that cell ran; fix that error first")
    if isinstance(exc, MissingName):
        return (f"`{exc.name}` is not defined: did you delete its cell, rename it, "
                f"or does an earlier cell fail?")
    if isinstance(exc, SubmissionError):
        if exc.exc_type == "ForbiddenCall" and exc.message.startswith(GIVEN):  # see explain()
            helper = exc.message.removeprefix(GIVEN)
            return (f"`{exercise}` calls {helper}, code the notebook gives you ready-made that "
                    f"computes what this exercise asks: write the exercise's code yourself")
        if exc.exc_type == "ForbiddenCall":  # also a diagnosis: see explain()
            lib = FORBIDDEN_HINT.get(exc.message, exc.message)
            return (f"`{exercise}` calls {lib}; this exercise asks you to build that "
                    f"operation yourself")
        if exc.exc_type == "ArgumentChanged":  # also a diagnosis: see explain()
            if exc.message:
                return f"`{exercise}` changes its argument {exc.message} in place: {UNCHANGED_RULE}"
            return f"`{exercise}` changes one of its tensor arguments in place: {UNCHANGED_RULE}"
        if exc.exc_type == "NotImplementedError":
            return f"`{exercise}` is not implemented yet (it raised NotImplementedError)"
        where = f" ({exc.where.strip().splitlines()[0].strip()})" if exc.where.strip() else ""
        return f"calling `{exc.target}` raised {exc.exc_type}: {exc.message}{where}"[:600]
    if isinstance(exc, BadValue):
        return f"`{exercise}` returned something the grader cannot read: {exc}"
    if isinstance(exc, CallHung):
        return (f"`{exc.call}` gave no answer within {exc.seconds:g} s: an infinite loop "
                f"(a loop whose condition never changes for these arguments?)")
    if isinstance(exc, WorkerOutOfMemory):
        return (f"the notebook reached its memory limit ({exc.gib:g} GiB): then no exercise "
                f"is graded, whatever those before earned, so that every run gives the same score")
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
