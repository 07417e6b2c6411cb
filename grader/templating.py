"""Text files the grader writes (feedback pages, a release's README and packaging files),
rendered from Jinja2 templates in ``grader/templates/``."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["g"] = lambda number: format(number, "g")
    return env


def render(name: str, **context: Any) -> str:
    return _environment().get_template(name).render(**context)
