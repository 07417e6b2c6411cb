"""A message: an English template (its id), its arguments, and its English text.

The lowest of the i18n modules (standard library and ``coursekit.errors`` only), imported by
whatever writes a sentence for a student or an instructor::

    check(ok, msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument",
                  axis=axis))

A :class:`Message` is a value of its own, not a ``str``: its ``id`` (the template, ``msgid``
of the ``.po`` catalogues) and ``args``, each argument's value as text or a message of its
own (a hint inside another, the evidence in parentheses), rendered in the same language.
``str(m)`` is its English text; :func:`grader.i18n.render` tells it in another language from
the id (the text is never matched back). What needs text renders it, in the reader's
language where a reader is known; ``+``, ``str.join``, an f-string or ``format`` of a message
raise ``TypeError`` (they would keep the English and lose the id): a larger message is one
whose arguments are messages (:func:`msg`, :func:`with_detail`, :func:`concat`, :func:`join`).

``coursekit``, which imports nothing of the grader, says its errors' sentences as data of the
same shape (:class:`coursekit.errors.Sentence`: the template and its fields' values);
:func:`told` makes a message of one, and a message's argument that is one is a message too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from coursekit.errors import Sentence


@functools.lru_cache(maxsize=8192)  # read once: a check builds its messages whether it fails or not
def parts(template: str) -> tuple[tuple[str, str], ...]:
    """``(("text", ...), ("field", "name"))`` of a template: ``{{``/``}}`` are literal braces."""
    out: list[tuple[str, str]] = []
    i, text = 0, ""
    while i < len(template):
        two = template[i:i + 2]
        if two in ("{{", "}}"):
            text += two[0]
            i += 2
            continue
        if template[i] == "{":
            depth, j = 0, i
            while j < len(template):
                depth += {"{": 1, "}": -1}.get(template[j], 0)
                if depth == 0:
                    break
                j += 1
            if text:
                out.append(("text", text))
                text = ""
            out.append(("field", template[i + 1:j]))
            i = j + 1
            continue
        text += template[i]
        i += 1
    if text:
        out.append(("text", text))
    return tuple(out)


def escape(text: str) -> str:
    """Plain text as a template: its braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` (kept when absent)."""
    return "".join(values.get(v, "{" + v + "}") if k == "field" else v for k, v in parts(template))


class Message:
    """The message of ``template`` filled with ``args``: an immutable value (``id``, ``args``).

    It is no ``str``: ``str(m)`` is its English text, :func:`grader.i18n.render` tells it in a
    language; ``+``, ``"".join`` and an f-string raise ``TypeError`` (they would keep the
    English and lose the id): a larger message is a message whose arguments are messages."""

    __slots__ = ("id", "args")
    id: str
    args: Mapping[str, str | Message]

    def __init__(self, template: str, args: Mapping[str, Any] | None = None) -> None:
        values = {k: v if isinstance(v, Message) else Message(v.id, v.args) if isinstance(v, Sentence)
                  else format(v, "") for k, v in (args or {}).items()}
        object.__setattr__(self, "id", template)
        object.__setattr__(self, "args", MappingProxyType(values))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Message is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Message is immutable: cannot delete {name}")

    def __str__(self) -> str:
        """The English text."""
        return fill(self.id, {k: str(v) for k, v in self.args.items()})

    def __format__(self, spec: str) -> str:
        raise TypeError(f"{self!r} in an f-string or format() would lose its id: compose it with "
                        "msg(...) or take its text with str() or grader.i18n.render()")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.id, self.args) == (other.id, other.args)

    def __hash__(self) -> int:
        return hash((self.id, tuple(sorted(self.args.items()))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (self.id, dict(self.args)))

    def __repr__(self) -> str:
        return f"msg({self.id!r}{''.join(f', {k}={v!r}' for k, v in self.args.items())})"

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "args", "text"}``: JSON, nested messages as objects of their own."""
        args = {k: v.to_dict() if isinstance(v, Message) else v for k, v in self.args.items()}
        return {"id": self.id, "args": args, "text": str(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        args = data.get("args") or {}
        return cls(str(data["id"]), {str(k): cls.from_dict(v) if isinstance(v, Mapping) else str(v)
                                     for k, v in args.items()})

    def map_values(self, fn: Callable[[str], str]) -> Message:
        """The same message with ``fn`` applied to each value that is no message (in the
        messages inside it too): a test's way to show a value otherwise (``inf`` for 1e30)."""
        return Message(self.id, {k: v.map_values(fn) if isinstance(v, Message) else fn(v)
                                 for k, v in self.args.items()})

    def walk(self) -> list[Message]:
        """This message and the messages in its arguments, depth first."""
        found = [self]
        for value in self.args.values():
            if isinstance(value, Message):
                found += value.walk()
        return found


def msg(template: str, /, **args: Any) -> Message:
    """A message for a student or an instructor: ``template`` (English, ``{name}`` fields; the
    id its translations are found by) and the values of its fields (a message, or any value,
    shown as ``format(value, "")``: apply a format spec before, ``format(x, ".3g")``)."""
    return Message(template, args)


def told(text: Message | Sentence | str) -> Message | str:
    """A message, or a coursekit sentence as the message of its id and fields, or plain text."""
    return Message(text.id, text.args) if isinstance(text, Sentence) else text


def said_by(exc: BaseException) -> Message | str:
    """What an error says: the message (or coursekit sentence) it was raised with, else its text."""
    text = exc.args[0] if exc.args else ""
    return told(text) if isinstance(text, Message | Sentence) else str(exc)


def with_detail(message: Message | str, detail: Message | str) -> Message:
    """``message (detail)``: a hint and its evidence or note in parentheses, each a message
    (each language writes its own brackets: ``{message}（{detail}）``)."""
    return msg("{message} ({detail})", message=message, detail=detail)


def map_values(text: Message | str, fn: Callable[[str], str]) -> Message | str:
    """:meth:`Message.map_values` of a message; ``fn(text)`` of plain text."""
    return text.map_values(fn) if isinstance(text, Message) else fn(text)


def concat(*pieces: Message | str) -> Message | str:
    """The pieces side by side: plain text when none is a message, else a message whose
    template is the text pieces (braces escaped) around a field for each message, so that
    each keeps its id and renders in the reader's language while the text between (code,
    punctuation) stays as it is. What ``+`` of a message and a string would have been."""
    if not any(isinstance(piece, Message) for piece in pieces):
        return "".join(str(piece) for piece in pieces)
    template, args = "", dict[str, Message]()
    for piece in pieces:
        if isinstance(piece, Message):
            name = f"part{len(args)}"
            template += "{" + name + "}"
            args[name] = piece
        else:
            template += escape(piece)
    return Message(template, args)


def join(separator: str, items: Iterable[Message | str]) -> Message | str:
    """``separator.join(items)`` for items that may be messages (see :func:`concat`)."""
    pieces: list[Message | str] = []
    for item in items:
        pieces += [separator, item] if pieces else [item]
    return concat(*pieces)
