"""Student ids, compared in one form and shown so that look-alikes can be told apart.

A student id is a folder name of ``submitted/``, a key of a roster an LMS exported, a
name in ``deadlines.toml``'s ``[extensions]``, a student of nbgrader's database: the same
id can come spelled in composed Unicode from one (``zoë``, U+00EB) and decomposed from
another (``zoe`` + U+0308, as macOS writes file names and some exports write text).
Wherever two sources' ids are compared, both go through :func:`key` (NFC); wherever an id
that matched nothing is printed, :func:`shown` spells out what is not plain ASCII.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def key(student_id: str) -> str:
    """The form in which ids are compared: Unicode NFC (``zoë`` whichever way it is spelled)."""
    return unicodedata.normalize("NFC", student_id)


def spelled_as(student_id: str, known: Iterable[str]) -> str:
    """``student_id`` as one of ``known`` spells it when they are the same id (:func:`key`),
    else in NFC: an id written where another program compares ids exactly (nbgrader's
    database) is written the way that program already knows it."""
    wanted = key(student_id)
    return next((k for k in known if key(k) == wanted), wanted)


def shown(student_id: str) -> str:
    """``student_id`` for a message: as it is when plain printable ASCII, else followed by
    its characters with every other one as a code point, ``zoë [z o e U+0308]``, so that
    two ids that look identical read differently."""
    if student_id.isascii() and student_id.isprintable() and student_id.strip() == student_id:
        return student_id
    chars = " ".join(c if c.isascii() and c.isprintable() and c != " " else f"U+{ord(c):04X}"
                     for c in student_id)
    return f"{student_id} [{chars}]"
