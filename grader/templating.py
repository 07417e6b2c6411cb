"""Text files the grader writes (feedback pages, a release's README and packaging files),
rendered from Jinja2 templates in ``grader/templates/``."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"
GRADESCOPE_TEMPLATES = TEMPLATES.parent / "integrations" / "gradescope" / "templates"
ESCAPED = (".html", ".htm", ".xml")


def escapes(name: str | None) -> bool:
    """Whether the template ``name`` escapes its values: by the extension of the file it
    renders (``report.html.j2`` escapes, ``README.md.j2`` and ``setup.sh.j2`` do not)."""
    return name is not None and name.removesuffix(".j2").endswith(ESCAPED)


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
    )
    env.filters["g"] = lambda number: format(number, "g")
    return env


def render(name: str, **context: Any) -> str:
    return _environment().get_template(name).render(**context)
