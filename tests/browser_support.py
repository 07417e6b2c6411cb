"""A real browser for the tests that drive one (tests/lessons/test_browser.py, the class report's
page): Debian's Chromium through Python Playwright, or why there is none."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 120_000

try:
    from playwright.sync_api import expect, sync_playwright  # noqa: F401 - test_browser uses expect
except ImportError:  # pragma: no cover - depends on the machine
    expect = sync_playwright = None

_missing = ("playwright is not installed (pip install playwright)" if sync_playwright is None
            else f"no Chromium at {CHROMIUM} (apt-get install chromium)"
            if not os.access(CHROMIUM, os.X_OK) else None)
if _missing and os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"COURSE_REQUIRE_BROWSER=1 but {_missing}")


@contextmanager
def browser_page(tmp_path: Path, request):
    """A page of a fresh headless Chromium; screenshot and page text kept if the test fails."""
    artifacts = Path(os.environ.get("COURSE_BROWSER_ARTIFACTS", tmp_path / "artifacts"))
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        page = context.pages[0] if context.pages else context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            yield page
        except BaseException as exc:
            artifacts.mkdir(parents=True, exist_ok=True)
            stem = artifacts / re.sub(r"\W+", "_", request.node.name)
            try:
                page.screenshot(path=f"{stem}.png", full_page=True)
                Path(f"{stem}.txt").write_text(page.inner_text("body"), encoding="utf-8")
            except Exception as shot:  # noqa: BLE001 - keep the original failure
                Path(f"{stem}.txt").write_text(f"no screenshot: {shot}")
            raise AssertionError(f"{exc}\n(screenshot and page text: {stem}.png / .txt; "
                                 f"server log: {tmp_path / 'jupyterlab.log'})") from exc
        finally:
            context.close()
