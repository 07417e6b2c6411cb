"""What a result was made from and with: the submission's content and time, the grader's
version, the sandbox's isolation level and protections (``results/<id>.json``), so that a
rerun of ``grade`` knows which results are stale and ``run.json`` vouches only for its own.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from functools import lru_cache
from typing import Any

from grader import PACKAGE_DIR

GRADER_DIR = PACKAGE_DIR


@lru_cache(maxsize=1)
def grader_version() -> str:
    """``<package version>+<hash of the grader's code and hidden tests>``: changes whenever
    a hidden test or the grading code does, installed or not."""
    try:
        version = importlib.metadata.version("attention-course")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    h = hashlib.sha256()
    for path in sorted(GRADER_DIR.rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(path.relative_to(GRADER_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{version}+{h.hexdigest()[:12]}"


def seed_fingerprint() -> str | None:
    """A fingerprint of the hidden-input seed when the graders use a fixed one (never the
    seed itself: results may travel further than the secret should)."""
    try:
        from coursekit import settings
    except ImportError:  # pragma: no cover - coursekit ships with the grader
        return None
    seed = getattr(settings, "grader_seed", lambda: None)()
    return f"sha256:{hashlib.sha256(str(seed).encode()).hexdigest()[:12]}" if seed else None


def settings_record(isolation: str, protections: list[str], missing: list[str],
                    limits: dict[str, Any]) -> dict[str, Any]:
    """The ``graded_with`` part of a result."""
    return {"grader": grader_version(), "isolation": isolation, "protections": list(protections),
            "missing": list(missing), "limits": limits, "seed": seed_fingerprint()}


def same_settings(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Two results were made under the same isolation level, protections and grader."""
    if not a:
        return False
    return all(a.get(k) == b.get(k) for k in ("grader", "isolation", "protections"))
