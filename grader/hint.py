"""One hint of a graded exercise: its sentence, the mistake it names and its kind.

The lowest of the grader's modules (standard library only): the hints are made in
``grader.check.messages``, kept by ``grader.results`` and ``grader.record``, translated by
``grader.i18n``.
"""

from __future__ import annotations


class Hint(str):
    """A sentence for the student; ``mistake`` is the id of the mistake it diagnoses (a key
    of the lesson's ``MISTAKES``), ``None`` for a symptom or an error."""

    mistake: str | None = None
    kind: str = "symptom"  # "diagnosis", "error" (the notebook raised, or is broken) or "symptom"

    def __new__(cls, text: str, mistake: str | None = None, kind: str | None = None) -> Hint:
        hint = super().__new__(cls, text)
        hint.mistake = mistake
        hint.kind = kind or ("diagnosis" if mistake else "symptom")
        return hint

    def __reduce__(self) -> tuple:
        return (Hint, (str(self), self.mistake, self.kind))
