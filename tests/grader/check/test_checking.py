"""grader.check.command: the one check that the CLI and the warm helper both run, told by its
arguments where its workers come from and whether to colour (no module global is set)."""

from __future__ import annotations

import pytest
from support import solution_path

from grader.check import command as checking
from grader.check.launch import LocalSource
from grader.outputs.render import check_output


def test_the_check_takes_its_workers_and_colour_as_arguments(capsys) -> None:
    made = []

    def source(limits):
        made.append(limits.wall_s)
        return LocalSource("no sandbox in this test")

    opts = checking.parse([str(solution_path("01_attention_by_hand")), "--timeout", "77"])
    assert checking.main(opts, check_output, source=source, color=True) == 0
    out, err = capsys.readouterr()
    assert made == [77.0]  # its workers came from `source`, with the check's limits
    assert "\033[" in out  # coloured, though stdout is no terminal here
    assert "could not start here (no sandbox in this test)" in err
    assert checking.main(opts, check_output, source=source, color=False) == 0
    assert "\033[" not in capsys.readouterr().out


def test_a_users_error_is_one_line(tmp_path, capsys) -> None:
    opts = checking.parse([str(tmp_path / "missing.ipynb"), "--lesson", "01"])
    assert checking.main(opts, check_output, source=lambda limits: LocalSource()) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader: ") and err.count("\n") == 1


class _Counted(LocalSource):
    """Plain workers, counted."""

    def __init__(self) -> None:
        super().__init__("no sandbox in this test")
        self.workers: list = []

    def start(self, limits, wait_s=None):
        self.workers.append(super().start(limits, wait_s))
        return self.workers[-1]


def test_the_notebook_is_sent_before_the_engine_is_waited_for(monkeypatch, capsys) -> None:
    """A cold check's worker runs the notebook while the trusted side still imports the
    hidden tests (torch on both sides, on two cores): ``run_check`` sends the cells to its
    first worker before it imports the engine, which then grades in that same worker."""
    from grader.check import engine
    from grader.check.remote import RemoteSubmission

    order: list[str] = []
    begin_load, check_notebook = RemoteSubmission.begin_load, engine.check_notebook

    def sent(self, cells, timeout):
        order.append("cells sent")
        begin_load(self, cells, timeout)

    def graded(*args, started=None, **kwargs):
        order.append("engine" + (" with the started worker" if started is not None else ""))
        return check_notebook(*args, started=started, **kwargs)

    monkeypatch.setattr(RemoteSubmission, "begin_load", sent)
    monkeypatch.setattr(engine, "check_notebook", graded)
    source = _Counted()
    opts = checking.parse([str(solution_path("01_attention_by_hand"))])
    assert checking.main(opts, check_output, source=lambda limits: source, color=False) == 0
    assert order == ["cells sent", "engine with the started worker"]
    assert len(source.workers) == 1  # the notebook ran once, in that worker
    assert capsys.readouterr().out.split()[-3:] == ["10", "/", "10"]  # full marks, as recorded


def test_no_worker_is_started_early_for_an_unknown_lesson_or_an_unreadable_notebook(tmp_path) -> None:
    from grader.check import launch
    from grader.common.limits import DEFAULT_LIMITS

    source = _Counted()
    renamed = tmp_path / "submission_1234.ipynb"  # its lesson is found by its cells, later
    renamed.write_bytes(solution_path("02_split_heads").read_bytes())
    broken = tmp_path / "01_attention_by_hand.ipynb"
    broken.write_text("{not json")
    assert launch.start_early(str(renamed), None, DEFAULT_LIMITS, source) is None
    assert launch.start_early(str(broken), None, DEFAULT_LIMITS, source) is None
    assert launch.start_early(str(broken), "42_nope", DEFAULT_LIMITS, source) is None
    assert source.workers == []


def test_a_started_worker_grades_and_one_unused_is_stopped(monkeypatch) -> None:
    from grader.check import engine, launch
    from grader.common.limits import DEFAULT_LIMITS

    source = _Counted()
    notebook = str(solution_path("02_split_heads"))
    started = launch.start_early(notebook, None, DEFAULT_LIMITS, source)
    assert started is not None
    report = engine.check_notebook(notebook, None, DEFAULT_LIMITS, source=source, started=started)
    assert report.score == report.max_score > 0 and len(source.workers) == 1

    def no_lesson(path, lesson):
        raise KeyError("no graders")

    monkeypatch.setattr(engine, "resolve_lesson", no_lesson)
    started = launch.start_early(notebook, None, DEFAULT_LIMITS, source)
    assert started is not None
    with pytest.raises(KeyError):
        engine.check_notebook(notebook, None, DEFAULT_LIMITS, source=source, started=started)
    assert started.worker.killed and started.worker.proc.poll() is not None


@pytest.mark.parametrize(("argv", "options"), [
    (["check", "nb.ipynb"], {}),
    (["check", "nb.ipynb", "--format", "json", "--profile"], {"--format": "json", "--profile": ""}),
    (["check", "--lesson=04", "nb.ipynb", "--timeout", "30", "--lang", "zh"],
     {"--lesson": "04", "--timeout": "30", "--lang": "zh"}),
    (["check", "nb.ipynb", "--call-timeout=2.5"], {"--call-timeout": "2.5"}),
])
def test_a_plain_check_takes_the_quick_way(argv: list[str], options: dict[str, str]) -> None:
    """``python -m grader check`` asks a running helper before importing the full command
    line, for the command lines the helper reads as the full one would."""
    from grader.helper import client

    assert client._plain_check(argv) == options


@pytest.mark.parametrize("argv", [
    [], ["grade", "x"], ["check"], ["check", "a.ipynb", "b.ipynb"], ["check", "nb.ipynb", "--no-helper"],
    ["check", "-h"], ["check", "nb.ipynb", "--format", "pdf"], ["check", "nb.ipynb", "--timeout", "soon"],
    ["check", "nb.ipynb", "--lesson"], ["check", "nb.ipynb", "--lang", "fr"], ["check", "nb.ipynb", "-x"],
    ["check", "nb.ipynb", "--format", "json", "--format=text"], ["check", "--profile=1", "nb.ipynb"],
])
def test_anything_else_takes_the_full_command_line(argv: list[str]) -> None:
    """Its usage, errors and other commands stay the full command line's (argparse's)."""
    from grader.helper import client

    assert client._plain_check(argv) is None


def test_the_quick_way_is_not_taken_with_helpers_off(monkeypatch) -> None:
    from grader.helper import client

    monkeypatch.setenv("COURSE_CHECK_HELPER", "off")
    monkeypatch.setattr(client, "tried", False)
    assert client.quick_check(["check", str(solution_path("01_attention_by_hand"))]) is None
    assert client.tried is False  # the full command line checks cold, and starts no helper


def test_the_quick_way_knows_checks_options_as_the_full_command_line_declares_them() -> None:
    """``client._VALUED`` / ``_FLAGS`` restate ``command.add_arguments`` (the client must not
    import argparse): every option they pass on exists there, with the same choices."""
    import argparse

    from grader.helper import client

    actions = {s: a for a in checking.parser()._actions for s in a.option_strings}
    for name, allowed in client._VALUED.items():
        assert actions[name].nargs is None and not isinstance(actions[name], argparse._StoreTrueAction)
        assert (tuple(actions[name].choices) if actions[name].choices else None) == allowed, name
    for name in client._FLAGS:
        assert isinstance(actions[name], argparse._StoreTrueAction), name


def test_background_imports_wait_for_their_release_before_the_second_part() -> None:
    """A cold check's trusted imports (grader.check.launch.BackgroundImports): the engine at
    once, the hidden tests (torch) only once the first worker has started."""
    import sys
    import time

    from grader.check.launch import BackgroundImports

    for name in ("colorsys", "wave"):
        sys.modules.pop(name, None)
    imports = BackgroundImports(["colorsys"], then=["wave"])
    imports.start()
    imports.start()  # once
    deadline = time.monotonic() + 30
    while "colorsys" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert "colorsys" in sys.modules and "wave" not in sys.modules
    imports.release()
    assert imports.thread is not None
    imports.thread.join(30)
    assert "wave" in sys.modules and not imports.thread.is_alive()


def test_a_cold_checks_zygote_preloads_what_the_notebooks_worker_imports(tmp_path) -> None:
    """Issue 52 item 4: a cold check's zygote imports torch and what the first backward
    imports (and torch._dynamo, the first optimizer's, for a lesson that trains) once it
    is ready, so its worker inherits them; nothing for a numpy lesson or an unreadable
    notebook."""
    from grader.check.launch import TORCH_PRELOAD, cold_preload

    assert "torch.fx.experimental.symbolic_shapes" in TORCH_PRELOAD
    assert cold_preload(str(solution_path("01_attention_by_hand")), None) == ()
    assert cold_preload(str(solution_path("04_multi_head_attention")), None) == TORCH_PRELOAD
    assert cold_preload(str(solution_path("09_training")), None) == (
        *TORCH_PRELOAD, "torch._dynamo")
    renamed = tmp_path / "submission.ipynb"  # found by its cells: torch, not the lesson's
    renamed.write_bytes(solution_path("09_training").read_bytes())
    assert cold_preload(str(renamed), None) == TORCH_PRELOAD
    broken = tmp_path / "04_multi_head_attention.ipynb"
    broken.write_text("{not json")
    assert cold_preload(str(broken), None) == ()
