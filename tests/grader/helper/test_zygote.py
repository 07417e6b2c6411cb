"""The trusted zygote's warm-up: what each check's trusted process inherits instead of
doing again."""

from __future__ import annotations

from grader.helper import zygote
from grader.i18n import LANGUAGES, catalogues
from grader.testkit import lessons


def test_the_trusted_zygote_reads_each_catalogue_so_that_no_check_parses_one(monkeypatch) -> None:
    """A zh check's trusted process is a fork of the zygote: the catalogue it renders with
    must be read there already (Babel's parse of the .po costs tens of ms of CPU), once per
    language with one, never for English."""
    monkeypatch.setattr(zygote, "PRELOAD", (), raising=False)  # not torch._dynamo here
    monkeypatch.setattr(lessons, "known_lessons", lambda: [])
    read: list[str] = []
    monkeypatch.setattr(catalogues, "read",
                        lambda lang, root=None: read.append(lang) or {"a": catalogues.Entry("b")})
    catalogues.table.cache_clear()
    try:
        zygote._warm_up()
        assert read == [lang for lang in LANGUAGES if lang != "en"]
        assert all(catalogues.table(lang) == {"a": "b"} for lang in read)  # kept, not read again
    finally:
        catalogues.table.cache_clear()
