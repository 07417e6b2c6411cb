"""The sandbox's code folder takes its compiled files from a cache (grader.sandbox.pool):
the same bytes as compiling, a stale or cut-short entry compiled again, no cache at all
where none can be made."""

from __future__ import annotations

import importlib.util
import marshal
import py_compile
import shutil
from pathlib import Path

import pytest

from grader.sandbox import pool

RUNTIME = Path(pool.__file__).resolve().parents[1] / "runtime"


def _folder(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(RUNTIME, root / "grader" / "runtime", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _compiled(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.pyc"))}


def test_a_second_folder_is_copied_from_the_cache(tmp_path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    first = _folder(tmp_path, "first")
    pool._compile(first, cache)
    made = _compiled(first)
    sources = list(first.rglob("*.py"))
    assert len(made) == len(sources) == len(list(cache.iterdir())) > 5

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again although the cache holds it")

    monkeypatch.setattr(py_compile, "compile", refuse)
    second = _folder(tmp_path, "second")
    pool._compile(second, cache)
    assert _compiled(second) == made
    for source in second.rglob("*.py"):  # hash-based, never checked, loads as code
        data = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        assert data[:16] == pool._header(source.read_bytes())
        assert marshal.loads(data[16:]).co_filename.endswith(source.name)


@pytest.mark.parametrize("damage", ["cut short", "another source"])
def test_a_damaged_entry_is_compiled_again(tmp_path, damage) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    pool._compile(_folder(tmp_path, "first"), cache)
    entries = sorted(cache.iterdir())
    headers = {e: e.read_bytes()[:16] for e in entries}
    for entry in entries:
        data = entry.read_bytes()
        entry.write_bytes(data[:20] if damage == "cut short" else data[:8] + b"\0" * 8 + data[16:])
    second = _folder(tmp_path, "second")
    pool._compile(second, cache)
    for source in second.rglob("*.py"):
        data = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        assert data[:16] == pool._header(source.read_bytes()) and len(data) > 20
    for entry in entries:  # and kept whole again
        data = entry.read_bytes()
        assert data[:16] == headers[entry] and marshal.loads(data[16:])


def test_no_cache_where_none_can_be_made(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert pool.bytecode_cache() is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    assert pool.bytecode_cache() == tmp_path / "home-cache" / "attention-course" / "sandbox-bytecode"
    root = _folder(tmp_path, "uncached")
    pool._compile(root, None)
    assert len(_compiled(root)) == len(list(root.rglob("*.py")))
