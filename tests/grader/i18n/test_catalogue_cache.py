"""A catalogue is parsed once per version, not once per process: :func:`catalogues.table`
keeps the ``.po``'s table as JSON in the user's cache, named by the file's SHA-256, and a
changed ``.po`` (still the source) is read again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.i18n import catalogues


@pytest.fixture()
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    catalogues.table.cache_clear()
    yield tmp_path / "cache"
    catalogues.table.cache_clear()


def _babel(lang: str) -> dict[str, str]:
    return {key: entry.text for key, entry in catalogues.read(lang).items() if entry.text}


def test_the_table_is_kept_and_read_back_without_parsing_the_po(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = catalogues.table("zh")
    assert first == _babel("zh") and len(first) > 500
    assert len(list(fresh.rglob("grader-zh-*.json"))) == 1
    catalogues.table.cache_clear()

    def no_parsing(lang: str, root: Path | None = None) -> dict[str, catalogues.Entry]:
        raise AssertionError("the .po was parsed again")

    monkeypatch.setattr(catalogues, "read", no_parsing)
    assert catalogues.table("zh") == first


def test_a_changed_catalogue_is_read_again(fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogues, "LOCALE_DIR", tmp_path / "locale")
    catalogues.write("xx", {"total": catalogues.Entry("TOTAL")})
    assert catalogues.table("xx") == {"total": "TOTAL"}
    catalogues.write("xx", {"total": catalogues.Entry("ALL")})
    catalogues.table.cache_clear()
    assert catalogues.table("xx") == {"total": "ALL"}
    assert len(list(fresh.rglob("grader-xx-*.json"))) == 2


def test_a_cache_that_cannot_be_written_still_gives_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    catalogues.table.cache_clear()
    try:
        assert catalogues.table("zh") == _babel("zh")
    finally:
        catalogues.table.cache_clear()
