"""The helper's own pool source: what it tells a check's client crosses as JSON."""

from __future__ import annotations

import json
from types import SimpleNamespace

from grader.helper.server import _PoolSource
from grader.i18n import msg
from grader.sandbox.probe import SandboxPlan


def test_the_missing_protections_cross_to_the_client_as_english_text() -> None:
    """A non-root user's sandbox lacks protections; their reasons are messages in the plan,
    and the helper sends them to the check's client as JSON (English, as run.json keeps
    them). A Message there broke every warm check of such a user ("not JSON serializable")."""
    plan = SandboxPlan("none", missing={"seccomp": msg("no {name} here", name="libseccomp")})
    source = _PoolSource(SimpleNamespace(plan=plan))
    assert json.loads(json.dumps({"missing": source.missing})) == {"missing": {"seccomp": "no libseccomp here"}}
