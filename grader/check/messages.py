"""Turn what went wrong in a hidden check into a sentence for the student.

Only texts written for students leave this module: the message of a failed ``check``,
the student's own exception, or a fixed sentence. Never the hidden test's code.
"""

from __future__ import annotations

import re

from grader.common.hint import Hint
from grader.i18n import Message, msg, said_by, with_detail
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
from grader.testkit.framework import Failed
from grader.testkit.submission import Posted

LIBRARY_CALL = "library_call"  # the mistake ids every lesson shares: see explain()
CHANGES_ITS_INPUT = "changes_its_input"  # grader.runtime.unchanged
GIVEN_ANSWER = "given_answer"  # Target.refuse: the notebook's given code, called by the exercise
SHARED_MISTAKES = (LIBRARY_CALL, CHANGES_ITS_INPUT, GIVEN_ANSWER)
UNCHANGED_RULE = (msg("a function must leave what it is given as it was (the caller still needs it): compute into a new array or tensor, `x = x - mean` rather than `x -= mean`, and no `add_`, `masked_fill_` or `x[...] = ...` on an argument"))

FORBIDDEN_HINT: dict[str, Message | str] = {
    "torch.nn.functional.scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward": "nn.MultiheadAttention",
    "torch.nn.functional.layer_norm": msg("F.layer_norm / nn.LayerNorm"),
    "torch.layer_norm": "torch.layer_norm",
    "torch.nn.functional.gelu": msg("F.gelu / nn.GELU"),
    "torch.nn.functional.batch_norm": msg("F.batch_norm / nn.BatchNorm1d"),
    "torch.nn.functional.group_norm": msg("F.group_norm / nn.GroupNorm"),
    "torch.nn.functional.instance_norm": msg("F.instance_norm / nn.InstanceNorm1d"),
    "torch.nn.functional.rms_norm": msg("F.rms_norm / nn.RMSNorm"),
    "torch.nn.functional.softmax": "F.softmax",
    "torch.nn.functional.cross_entropy": msg("F.cross_entropy / nn.CrossEntropyLoss"),
}


def describe(exc: BaseException) -> Message | str:
    """What a runtime exception (raised beside the submission, whose text stays English there)
    says, as a message (its own text when it carries none): a call that hung or crashed, the memory limit, the wall clock."""
    if isinstance(exc, CallHung):
        return msg("{call} gave no answer within {seconds} s", call=exc.call, seconds=format(exc.seconds, "g"))
    if isinstance(exc, CallCrashed):
        return msg("the notebook's process stopped during {call}", call=exc.call)
    if isinstance(exc, WorkerOutOfMemory):
        return msg("the notebook reached its memory limit ({gib} GiB)", gib=format(exc.gib, "g"))
    return said_by(exc)


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
        note = _related(folded)
        text: Message | str = with_detail(first.text, note)
        if lang != "en":  # the failures are rendered already (i18n.localize): so is the count
            from grader.i18n import render

            text = render(text, lang)
        shown[0] = first.with_text(text)
    return shown


def _related(folded: int) -> Message:
    return msg("+{folded} related check{s} failed", folded=folded, s='s' if folded > 1 else '')


def leading(text: Message | str) -> Message | str:
    """A hint that :func:`fold` shows, without the count of related checks it added (a hint
    read back as English text: the text before that count, or before a second hint)."""
    if isinstance(text, Message):
        detail = text.args.get("detail")
        folded = isinstance(detail, Message) and detail.id == _related(2).id
        return text.args["message"] if folded and text.id == with_detail("", "").id else text
    return re.split(r"; | \(\+\d+ related", text, maxsplit=1)[0].strip()


def explain(exc: BaseException | None, exercise: str) -> Hint:
    """The sentence for one failed check, as a :class:`Hint`."""
    if isinstance(exc, Posted):  # an earlier operation's error, raised by a later request
        exc = exc.error
    if isinstance(exc, Failed):
        text = exc.message or msg("`{exercise}` returned something that is not an array or tensor", exercise=exercise)
        return Hint(text, exc.mistake)
    if isinstance(exc, SubmissionError) and exc.exc_type == "ForbiddenCall":
        given = exc.message.startswith(GIVEN)
        return Hint(_explain_error(exc, exercise), GIVEN_ANSWER if given else LIBRARY_CALL)
    if isinstance(exc, SubmissionError) and exc.exc_type == "ArgumentChanged":
        return Hint(_explain_error(exc, exercise), CHANGES_ITS_INPUT)
    return Hint(_explain_error(exc, exercise), None, "error")


def _explain_error(exc: BaseException | None, exercise: str) -> Message:
    if isinstance(exc, MissingName) and exc.cause:
        return (msg("`{name}` is not defined: its cell failed with {error}, so nothing in that cell ran; fix that error first", name=exc.name, error=exc.cause))
    if isinstance(exc, MissingName):
        return (msg("`{name}` is not defined: did you delete its cell, rename it, or does an earlier cell fail?", name=exc.name))
    if isinstance(exc, SubmissionError):
        if exc.exc_type == "ForbiddenCall" and exc.message.startswith(GIVEN):  # see explain()
            helper = exc.message.removeprefix(GIVEN)
            return (msg("`{exercise}` calls {helper}, code the notebook gives you ready-made that computes what this exercise asks: write the exercise's code yourself", exercise=exercise, helper=helper))
        if exc.exc_type == "ForbiddenCall":  # also a diagnosis: see explain()
            lib = FORBIDDEN_HINT.get(exc.message, exc.message)
            return (msg("`{exercise}` calls {lib}; this exercise asks you to build that operation yourself", exercise=exercise, lib=lib))
        if exc.exc_type == "ArgumentChanged":  # also a diagnosis: see explain()
            if exc.message:
                return msg("`{exercise}` changes its argument {argument} in place: {UNCHANGED_RULE}", exercise=exercise, argument=exc.message, UNCHANGED_RULE=UNCHANGED_RULE)
            return msg("`{exercise}` changes one of its tensor arguments in place: {UNCHANGED_RULE}", exercise=exercise, UNCHANGED_RULE=UNCHANGED_RULE)
        if exc.exc_type == "NotImplementedError":
            return msg("`{exercise}` is not implemented yet (it raised NotImplementedError)", exercise=exercise)
        where = f" ({exc.where.strip().splitlines()[0].strip()})" if exc.where.strip() else ""
        return msg("calling `{function}` raised {error_type}: {error}{where}", function=exc.target,
                   error_type=exc.exc_type, error=exc.message[:500], where=where[:100])
    if isinstance(exc, BadValue):
        return msg("`{exercise}` returned something the grader cannot read: {error}", exercise=exercise, error=exc)
    if isinstance(exc, CallHung):
        return (msg("`{call}` gave no answer within {seconds} s: an infinite loop (a loop whose condition never changes for these arguments?)", call=exc.call, seconds=format(exc.seconds, 'g')))
    if isinstance(exc, WorkerOutOfMemory):
        return (msg("the notebook reached its memory limit ({gib} GiB): then no exercise is graded, whatever those before earned, so that every run gives the same score", gib=format(exc.gib, 'g')))
    if isinstance(exc, CallCrashed):
        return (msg("`{call}` stopped the notebook's process (it crashed, exited or ran out of memory)", call=exc.call))
    if isinstance(exc, WorkerTimeout):
        return msg("the notebook took too long ({what}): an infinite loop?", what=describe(exc))
    if isinstance(exc, WorkerDied):
        return msg("the notebook's process stopped (it crashed, exited or ran out of memory)")
    if isinstance(exc, ProtocolError):
        return msg("the notebook's process sent back something unreadable")
    return msg("a hidden check of `{exercise}` failed", exercise=exercise)
