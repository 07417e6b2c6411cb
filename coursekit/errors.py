"""Errors the person running a command can fix (a wrong lesson, a missing folder, no sandbox
on this machine). ``grader``'s command line prints their message on one line and exits
with their ``exit_code``; any other exception is a bug and shows as one (a traceback).

Here, in ``coursekit`` (which imports nothing of the grader), so that the catalogue, the
grader's modules and its command line can all share the base class without a cycle.

What such an error says is a :class:`Sentence`: its English template (the id under which the
grader's catalogue, ``grader/i18n/locale/<lang>/LC_MESSAGES/grader.po``, translates it) and
its fields' values, kept apart as data, as the grader's own messages are
(``grader.i18n.message``); ``str()`` is the English. The grader tells it in the reader's
language from the id (``grader.i18n.render``), and ``python -m grader.authoring i18n
extract`` reads each ``sentence("...")`` here as it reads the grader's ``msg("...")``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class Sentence:
    """A sentence for a person: ``id`` (the English template, ``{name}`` fields, ``{{``/``}}``
    for braces) and ``args`` (each field's value as text). Immutable; ``str()`` is English."""

    __slots__ = ("id", "args")
    id: str
    args: Mapping[str, str]

    def __init__(self, template: str, args: Mapping[str, object] | None = None) -> None:
        object.__setattr__(self, "id", template)
        object.__setattr__(self, "args", MappingProxyType({k: format(v, "") for k, v in (args or {}).items()}))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Sentence is immutable: cannot set {name}")

    def __str__(self) -> str:
        return self.id.format_map(self.args)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sentence):
            return NotImplemented
        return (self.id, self.args) == (other.id, other.args)

    def __hash__(self) -> int:
        return hash((self.id, tuple(sorted(self.args.items()))))

    def __reduce__(self) -> tuple[object, ...]:
        return (Sentence, (self.id, dict(self.args)))

    def __repr__(self) -> str:
        return f"sentence({self.id!r}{''.join(f', {k}={v!r}' for k, v in self.args.items())})"


def sentence(template: str, /, **args: object) -> Sentence:
    """What a coursekit error says: ``template`` (English, its id in the grader's catalogue)
    and its fields' values (shown as ``format(value, "")``)."""
    return Sentence(template, args)


class UserError(Exception):
    """A problem in what the user asked for or has, said in a sentence (its first argument:
    a :class:`Sentence`, a grader message or plain text)."""

    exit_code = 2


class UnknownLesson(UserError, KeyError):
    """No such lesson (still a ``KeyError``, as the catalogue's look-ups always raised)."""

    def __str__(self) -> str:  # the sentence itself, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


class SettingError(UserError, ValueError):
    """One of the course's environment variables (``coursekit.settings``) holds a value it
    cannot take, or a lesson is asked for a preset it lacks (still a ``ValueError``)."""
