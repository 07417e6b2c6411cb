"""Text files the grader writes (feedback pages, a release's README and packaging files),
rendered from Jinja2 templates in ``grader/common/templates/``."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"
GRADESCOPE_TEMPLATES = TEMPLATES.parents[1] / "integrations" / "gradescope" / "templates"
ESCAPED = (".html", ".htm", ".xml")


def points(number: float) -> str:
    """A score as it is recorded (``results/``, ``grades.csv``: rounded to 4 decimals), every
    digit of it shown: ``0.25``, ``11.25``, ``17`` (never ``0.2`` for ``0.25``, as ``:.1f`` gives,
    nor ``139.463`` for ``139.4625``, as ``:g`` gives). Every score a person reads goes through it."""
    text = f"{round(float(number), 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def escapes(name: str | None) -> bool:
    """Whether the template ``name`` escapes its values: by the extension of the file it
    renders (``report.html.j2`` escapes, ``README.md.j2`` and ``setup.sh.j2`` do not)."""
    return name is not None and name.removesuffix(".j2").endswith(ESCAPED)


def _shown(context: Any, value: Any) -> Any:
    """What a ``{{ value }}`` of a template shows (Jinja's ``finalize``): a message in the
    page's language, through the page's ``t`` (a message's ``str`` is its English, which a
    Chinese page would show without complaint); TypeError in a template without one."""
    from grader.i18n.message import Message

    if not isinstance(value, Message):
        return value
    words = context.get("t")
    if words is None:
        raise TypeError(f"a message in template {context.name} that has no `t` to say it in the "
                        f"page's language: {value.id!r}")
    return words(value)


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([TEMPLATES, GRADESCOPE_TEMPLATES]),
        autoescape=escapes,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=jinja2.pass_context(_shown),
    )
    env.filters["points"] = points
    return env


def render(name: str, **context: Any) -> str:
    return _environment().get_template(name).render(**context)
