"""Errors the person running a command can fix (a wrong lesson, a missing folder, no sandbox
on this machine). ``grader``'s command line prints their message on one line and exits
with their ``exit_code``; any other exception is a bug and shows as one (a traceback).

Here, in ``coursekit`` (which imports nothing of the grader), so that the catalogue, the
grader's modules and its command line can all share the base class without a cycle."""

from __future__ import annotations


class UserError(Exception):
    """A problem in what the user asked for or has, said in a sentence."""

    exit_code = 2


class UnknownLesson(UserError, KeyError):
    """No such lesson (still a ``KeyError``, as the catalogue's look-ups always raised)."""

    def __str__(self) -> str:  # the sentence itself, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""
