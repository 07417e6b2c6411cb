"""One hint of a graded exercise: its sentence, the mistake it names and its kind.

The lowest of the grader's modules (standard library only): the hints are made in
``grader.check.messages``, kept by ``grader.results`` (and with it in the graded folder,
``grader.results.folder``), rendered in the reader's language by ``grader.i18n`` from the
id and arguments of its text, a :class:`grader.i18n.Message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.i18n.message import Message

#: What a hint is: it names a mistake (``diagnosis``), the notebook raised or is broken
#: (``error``), or it says what is wrong without knowing why (``symptom``).
KINDS = ("diagnosis", "error", "symptom")


@dataclass(frozen=True)
class Hint:
    """A sentence for the student (``text``: a message, or, once rendered in a reader's
    language by :func:`grader.i18n.localize`, its text); ``mistake`` is the id of the mistake it diagnoses (a key
    of the lesson's ``MISTAKES``), ``None`` for a symptom or an error; ``kind`` defaults
    to ``diagnosis`` with a mistake, else ``symptom``."""

    text: Message | str
    mistake: str | None = None
    kind: str = field(default="")

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", "diagnosis" if self.mistake else "symptom")

    def __str__(self) -> str:
        return str(self.text)

    def with_text(self, text: Message | str) -> Hint:
        """The same hint (mistake, kind) told in other words: translated, or with a note."""
        return Hint(text, self.mistake, self.kind)

    def as_dict(self) -> dict[str, Any]:
        """``text`` (English), ``mistake``, ``kind`` and, for a message
        (:class:`grader.i18n.Message`), its ``id`` and ``args``: what renders it in another
        language."""
        data: dict[str, Any] = {"text": str(self.text), "mistake": self.mistake, "kind": self.kind}
        to_dict = getattr(self.text, "to_dict", None)
        if callable(to_dict):
            message = to_dict()
            data |= {"id": message["id"], "args": message["args"]}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hint:
        mistake = data.get("mistake")
        text: Message | str = str(data.get("text", ""))
        if isinstance(data.get("id"), str):
            from grader.i18n.message import Message

            text = Message.from_dict(data)
        return cls(text, str(mistake) if mistake else None, str(data.get("kind") or "symptom"))
