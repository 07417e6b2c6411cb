"""grader.check.command: the one check that the CLI and the warm helper both run, told by its
arguments where its workers come from and whether to colour (no module global is set)."""

from __future__ import annotations

from conftest import solution_path

from grader.check import command as checking
from grader.check.launch import LocalSource


def test_the_check_takes_its_workers_and_colour_as_arguments(capsys) -> None:
    made = []

    def source(limits):
        made.append(limits.wall_s)
        return LocalSource("no sandbox in this test")

    opts = checking.parse([str(solution_path("01_attention_by_hand")), "--timeout", "77"])
    assert checking.main(opts, source=source, color=True) == 0
    out, err = capsys.readouterr()
    assert made == [77.0]  # its workers came from `source`, with the check's limits
    assert "\033[" in out  # coloured, though stdout is no terminal here
    assert "could not start here (no sandbox in this test)" in err
    assert checking.main(opts, source=source, color=False) == 0
    assert "\033[" not in capsys.readouterr().out


def test_a_users_error_is_one_line(tmp_path, capsys) -> None:
    opts = checking.parse([str(tmp_path / "missing.ipynb"), "--lesson", "01"])
    assert checking.main(opts, source=lambda limits: LocalSource()) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader: ") and err.count("\n") == 1
