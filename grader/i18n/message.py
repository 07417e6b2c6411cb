"""A message: an English template (its id), its arguments, and its English text.

The lowest of the i18n modules (standard library only), imported by whatever writes a
sentence for a student or an instructor::

    check(ok, msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument",
                  axis=axis))

A :class:`Message` *is* its English text (a ``str``: code that only passes a message on, joins
it into the gradebook or compares it, needs no change) and carries its ``id`` (the template,
``msgid`` of the ``.po`` catalogues) and ``args``: each argument's value as text, or a message
of its own (a hint inside another, the evidence in parentheses), which is rendered in the same
language. :func:`grader.i18n.render` tells it in another language from the id; the text is
never matched back. A message that goes through plain string operations (``+``, an f-string,
slicing) becomes plain text and loses its id: build the larger message with :func:`msg`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any


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


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` (kept when absent)."""
    return "".join(values.get(v, "{" + v + "}") if k == "field" else v for k, v in parts(template))


class Message(str):
    """The English text of ``template`` filled with ``args``; ``id`` and ``args`` kept."""

    id: str
    args: dict[str, str | Message]

    def __new__(cls, template: str, args: Mapping[str, Any] | None = None) -> Message:
        values = {k: v if isinstance(v, Message) else format(v, "") for k, v in (args or {}).items()}
        self = super().__new__(cls, fill(template, values))
        self.id, self.args = template, values
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (self.id, self.args))

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


def with_detail(message: str, detail: str) -> Message:
    """``message (detail)``: a hint and its evidence or note in parentheses, each a message
    (each language writes its own brackets: ``{message}（{detail}）``)."""
    return msg("{message} ({detail})", message=message, detail=detail)


def map_values(text: str, fn: Callable[[str], str]) -> str:
    """:meth:`Message.map_values` of a message; ``fn(text)`` of plain text."""
    return text.map_values(fn) if isinstance(text, Message) else fn(text)
