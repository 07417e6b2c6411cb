"""The course's settings from the environment, read here and nowhere else.

==================== =====================================================================
variable             meaning
==================== =====================================================================
``COURSE_DATASETS``  the folder holding the datasets (``numerals/``, ...); default: the
                     ``datasets/`` folder of this copy of the course (:func:`datasets_root`)
``COURSE_GRADING``   ``1``: the notebook is being graded or tested, so long work takes its
                     smallest size (lesson 09 trains its ``smoke`` preset). Also true when
                     ``CI=true``, or when the kernel runs in nbgrader's ``autograded/``
                     folder (:func:`grading`); ``nbgrader_config.py`` sets it for nbgrader
``COURSE_PRESET``    the preset of lessons 09-11 (``smoke``, ``cpu``, ``gpu``), chosen from
                     outside the notebook (:func:`preset`; :func:`load_preset`)
``COURSE_DIRECTION`` their translation direction (``digits2zh``, ``zh2digits``), chosen
                     from outside the notebook (:func:`direction`; :func:`load_preset`)
``COURSE_THREADS``   CPU threads for training (:func:`threads`); default: the free cores
                     (:func:`choose_threads`)
``COURSE_RUN_DIR``   where lesson 09 keeps checkpoints and outputs (:func:`run_dir`);
                     default ``runs`` beside the notebook
``COURSE_GRADER_SEED`` the seed of the hidden graders' inputs (:func:`grader_seed`), an
                     instructor's secret: the same value reproduces a grading run; unset,
                     every run draws fresh inputs. The grader never passes it to the
                     notebook's process; in an nbgrader kernel the student's code could
                     read it, so set it only for the sandboxed ``grader grade``
``COURSE_CALL_TIMEOUT`` seconds one call of a hidden check may take inside an nbgrader
                     kernel (:func:`call_timeout`); default: the grader's (``Limits.call_s``).
                     ``check`` and ``grade`` take ``--call-timeout`` instead
``COURSE_EDITION``   which edition of each lesson an nbgrader course holds: ``en``
                     (default), ``zh``, or ``both`` to let students choose
                     (:func:`edition`; ``grader/integrations/nbgrader/editions.py``)
``COURSE_LANG``      the language of the hidden graders' hints (``en``, ``zh``); default:
                     the language of the notebook graded (:func:`language`)
``COURSE_AUTOGRADE``  how ``nbgrader autograde`` runs the submitted notebooks: ``sandbox``
                     (default: in the course's sandbox, as ``grader grade`` does, never as
                     the instructor; ``grader/integrations/nbgrader/sandbox.py``) or ``kernel``
                     (nbgrader's own Execute: each notebook in a Jupyter kernel of the
                     account that runs autograde, able to read and write whatever that
                     account can) (:func:`autograde`)
``COURSE_CHECK_HELPER`` minutes of idleness after which ``grader check``'s warm helper
                     stops (default 15); ``off`` (or ``0``) checks without a helper, each
                     time in a fresh process (:func:`check_helper_minutes`). Off by
                     default when ``CI=true``
``GRADER_LOG_LEVEL``  what the grader says about its own work on stderr (``debug``,
                     ``info``, ``warning``, ``error``, ``critical``; default ``warning``),
                     where no ``--log-level`` or ``-v`` says (:func:`log_level`); a command
                     given one sets it for the processes it starts (``grader.common.logs``)
``GRADER_DEBUG``     any value but ``0``: the grader's log at ``debug``, and the traceback
                     of a hidden test's own error (a grader bug, not the student's)
                     printed even where no log is set up (:func:`debug`)
``GRADER_SANDBOX_WITHOUT`` a test hook: the sandbox's protections to act as missing
                     (``bwrap,cgroups,...`` or ``all``; :func:`sandbox_without`)
``AUTOGRADER_ROOT``  Gradescope's folder (default ``/autograder``), for testing the
                     autograder package elsewhere (:func:`gradescope_root`)
==================== =====================================================================

Other programs' variables read here: ``CI`` (:func:`on_ci`), ``XDG_CACHE_HOME``
(:func:`cache_home`), ``XDG_RUNTIME_DIR`` (:func:`runtime_dir`), ``MPLCONFIGDIR``
(:func:`matplotlib_config_dir`) and Jupyter's ``JPY_SESSION_NAME`` (:func:`jupyter_session`).
``PYTHONPATH`` is only passed on to the processes the grader starts, never read as a setting.
The ``COURSE_*`` variables as a whole (:func:`course_variables`) go with a warm check to the
helper's trusted process, which takes them in place of its own (:func:`use_course_variables`).

The test suite reads a few of its own (``COURSE_REQUIRE_BROWSER``, ``COURSE_CHROMIUM``,
``COURSE_BROWSER_ARTIFACTS``, ``COURSE_BROWSER_SCREENSHOT``: see ``tests/lessons/test_browser.py``).
The grader's time and memory limits are command-line options, not environment variables.
Standard library only; :func:`load_preset` and :func:`choose_device` import torch when called
(the lessons' presets, device and threads: one helper each, each lesson passing its own
``PRESETS``; a preset field added after checkpoints were saved, :func:`added_field`, and the
preset a checkpoint was saved with, :func:`saved_preset`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from coursekit.errors import SettingError, sentence

if TYPE_CHECKING:
    from pathlib import Path

    import torch

DATASETS = "COURSE_DATASETS"
GRADING = "COURSE_GRADING"
PRESET = "COURSE_PRESET"
DIRECTION = "COURSE_DIRECTION"
THREADS = "COURSE_THREADS"
RUN_DIR = "COURSE_RUN_DIR"
GRADER_SEED = "COURSE_GRADER_SEED"
CALL_TIMEOUT = "COURSE_CALL_TIMEOUT"
EDITION = "COURSE_EDITION"
LANG = "COURSE_LANG"
AUTOGRADE = "COURSE_AUTOGRADE"
AUTOGRADE_CHOICES = ("sandbox", "kernel")

#: The editions an nbgrader course may hold (COURSE_EDITION), and the hints' languages.
EDITION_CHOICES = ("en", "zh", "both")
LANGUAGES = ("en", "zh")
CHECK_HELPER = "COURSE_CHECK_HELPER"
CHECK_HELPER_DEFAULT_MINUTES = 15.0

DEBUG = "GRADER_DEBUG"
LOG_LEVEL = "GRADER_LOG_LEVEL"
#: The levels of the grader's log (``logging``'s names, lower case), most said first.
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
SANDBOX_WITHOUT = "GRADER_SANDBOX_WITHOUT"
GRADESCOPE_ROOT = "AUTOGRADER_ROOT"
#: What the course's own variables start with (``COURSE_*``: :func:`course_variables`).
COURSE_PREFIX = "COURSE_"

#: A lesson's preset: a frozen dataclass with ``name`` and ``direction`` fields. (Not bound to
#: typeshed's ``DataclassInstance``: this module is what students' code imports, and the course's
#: import checks read every import, ``TYPE_CHECKING`` ones too.)
PresetT = TypeVar("PresetT")
T = TypeVar("T")
#: The key of a preset field's metadata that holds the value it had before it existed (:func:`added_field`).
SAVED_BEFORE = "saved_before"
#: The direction of the numerals task when neither an argument nor ``$COURSE_DIRECTION`` says.
DEFAULT_DIRECTION = "digits2zh"

#: The folder in which nbgrader runs the notebooks it autogrades (``autograded/<student>/<lesson>/``).
AUTOGRADED_FOLDER = "autograded"


def datasets_root() -> Path | None:
    """``$COURSE_DATASETS`` (``~`` expanded), or None when it is not set."""
    from pathlib import Path  # here: a warm check's client imports this module, and not pathlib

    value = os.environ.get(DATASETS)
    return Path(value).expanduser() if value else None


def grading() -> bool:
    """Whether the notebook runs to be graded or tested rather than read: ``COURSE_GRADING=1``,
    ``CI=true``, or a working folder inside nbgrader's ``autograded/``."""
    from pathlib import Path

    return os.environ.get(GRADING) == "1" or on_ci() or AUTOGRADED_FOLDER in Path.cwd().parts


def on_ci() -> bool:
    """``CI=true`` (as GitHub Actions, GitLab CI and most others set it)."""
    return os.environ.get("CI", "").lower() == "true"


def preset() -> str | None:
    """``$COURSE_PRESET``, or None when it is not set."""
    return os.environ.get(PRESET) or None


def direction() -> str | None:
    """``$COURSE_DIRECTION``, or None when it is not set."""
    return os.environ.get(DIRECTION) or None


def threads() -> int | None:
    """``$COURSE_THREADS`` (at least 1), or None when it is not set."""
    value = os.environ.get(THREADS)
    if not value:
        return None
    try:
        return max(1, int(value))
    except ValueError:
        raise SettingError(sentence("{variable} must be a whole number of threads, got {value}",
                                    variable=THREADS, value=repr(value))) from None


def load_preset(presets: Mapping[str, PresetT], name: str | None = None, direction: str | None = None,
                **changes: Any) -> PresetT:
    """The preset ``name`` of a lesson's ``presets`` (else ``$COURSE_PRESET``, else ``smoke``
    when grading or in CI, else ``gpu`` with CUDA, else ``cpu``) for ``direction`` (else
    ``$COURSE_DIRECTION``, else ``digits2zh``), with any field changed by keyword:
    ``load_preset(PRESETS, "cpu", batch_size=64)``; a misspelt field is a ``TypeError``."""
    name = name or preset()
    if name is None:
        name = "smoke" if grading() else "gpu" if _cuda() else "cpu"
    if name not in presets:
        raise SettingError(sentence("unknown preset {preset}; choose one of {presets}",
                                    preset=repr(name), presets=", ".join(presets)))
    import dataclasses  # here: a warm check's client imports this module, and not dataclasses

    chosen = direction or _direction() or DEFAULT_DIRECTION
    return dataclasses.replace(presets[name], direction=chosen, **changes)  # type: ignore[type-var]


_direction = direction  # load_preset's argument of that name hides the function


def added_field(default: T, *, before: T) -> T:
    """A preset field added after checkpoints were saved without it, declared next to the
    field: ``rope_base: float = settings.added_field(100.0, before=10000.0)``. ``default`` is
    today's; ``before``, the value that applied while the field did not exist, is what a
    checkpoint saved then gets from :func:`saved_preset`."""
    import dataclasses  # here, as in load_preset

    return dataclasses.field(default=default, metadata={SAVED_BEFORE: before})


def saved_preset(preset_class: Callable[..., PresetT], config: Mapping[str, Any]) -> PresetT:
    """The preset a checkpoint was saved with, from its ``config`` (the preset's fields as a
    dict): a field missing from it, added to ``preset_class`` since, takes the value that
    applied then (its :func:`added_field` ``before``), not today's default."""
    import dataclasses

    then = {f.name: f.metadata[SAVED_BEFORE] for f in dataclasses.fields(preset_class)  # type: ignore[arg-type]
            if SAVED_BEFORE in f.metadata and f.name not in config}
    return preset_class(**{**then, **config})


def choose_device() -> torch.device:
    """A CUDA GPU if there is one, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def choose_threads() -> int:
    """CPU threads for training: ``$COURSE_THREADS``, else the cores that are free now (CPU
    count minus the 1-minute load average, at least 1). Threads on idle cores speed training
    up; more threads than free cores can make it many times SLOWER, because OpenMP threads
    that wait for a busy core spin (lesson 09 §0; ``benchmarks/throughput.py --threads N``)."""
    chosen = threads()
    if chosen is not None:
        return chosen
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not available on Windows
        return 1
    return max(1, min(cores, round(cores - load)))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def run_dir() -> Path:
    """``$COURSE_RUN_DIR``, else ``runs`` (relative: beside the notebook)."""
    from pathlib import Path  # here: a warm check's client imports this module, and not pathlib

    return Path(os.environ.get(RUN_DIR, "runs"))


def grader_seed() -> str | None:
    """``$COURSE_GRADER_SEED`` (any text), or None when it is not set."""
    return os.environ.get(GRADER_SEED, "").strip() or None


def call_timeout() -> float | None:
    """``$COURSE_CALL_TIMEOUT`` in seconds (positive), or None when it is not set."""
    value = os.environ.get(CALL_TIMEOUT)
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise SettingError(sentence("{variable} must be a number of seconds, got {value}",
                                    variable=CALL_TIMEOUT, value=repr(value))) from None
    if seconds <= 0:
        raise SettingError(sentence("{variable} must be positive, got {value}", variable=CALL_TIMEOUT, value=repr(value)))
    return seconds


def edition() -> str:
    """``$COURSE_EDITION`` (``en``, ``zh`` or ``both``), default ``en``."""
    value = (os.environ.get(EDITION) or "en").strip().lower()
    if value not in EDITION_CHOICES:
        raise SettingError(sentence("{variable} must be one of {choices}, got {value}", variable=EDITION,
                                    choices=", ".join(EDITION_CHOICES), value=repr(value)))
    return value


def autograde() -> str:
    """``$COURSE_AUTOGRADE`` (``sandbox`` or ``kernel``), default ``sandbox``."""
    value = (os.environ.get(AUTOGRADE) or "sandbox").strip().lower()
    if value not in AUTOGRADE_CHOICES:
        raise SettingError(sentence("{variable} must be one of {choices}, got {value}", variable=AUTOGRADE,
                                    choices=", ".join(AUTOGRADE_CHOICES), value=repr(value)))
    return value


def language(known: Iterable[str] = LANGUAGES) -> str | None:
    """``$COURSE_LANG`` (``en`` or ``zh``: ``known``, the grader passes the languages it has
    a catalogue of), or None when it is not set (or not a language the hints are written in)."""
    value = (os.environ.get(LANG) or "").strip().lower().replace("-", "_").split("_")[0]
    return value if value in tuple(known) else None


def check_helper_minutes() -> float | None:
    """``$COURSE_CHECK_HELPER``: the check helper's idle minutes, or None when it is off
    (``off``, ``no``, ``false``, ``0``; unset on CI)."""
    value = os.environ.get(CHECK_HELPER, "").strip().lower()
    if not value:
        return None if on_ci() else CHECK_HELPER_DEFAULT_MINUTES
    if value in ("off", "no", "false", "0"):
        return None
    try:
        minutes = float(value)
    except ValueError:
        raise SettingError(sentence("{variable} must be a number of minutes or 'off', got {value}",
                                    variable=CHECK_HELPER, value=repr(value))) from None
    return minutes if minutes > 0 else None



def course_variables() -> dict[str, str]:
    """Every ``COURSE_*`` variable of this process: the settings a check answered by another
    process (the check helper's) must see as this one does."""
    return {k: v for k, v in os.environ.items() if k.startswith(COURSE_PREFIX)}


def use_course_variables(variables: Mapping[str, object]) -> None:
    """``variables``' ``COURSE_*`` entries in place of this process's own (a check's, in the
    helper's trusted process); anything else in ``variables`` is ignored."""
    for key in course_variables():
        del os.environ[key]
    os.environ.update({str(k): str(v) for k, v in variables.items()
                       if str(k).startswith(COURSE_PREFIX)})


def debug() -> bool:
    """``$GRADER_DEBUG`` is set to anything but empty or ``0``."""
    return os.environ.get(DEBUG, "").strip() not in ("", "0")


def log_level_set() -> str:
    """``$GRADER_LOG_LEVEL`` as set (stripped, lower case; ``""`` when it is not), checked or not."""
    return os.environ.get(LOG_LEVEL, "").strip().lower()


def log_level() -> str | None:
    """``$GRADER_LOG_LEVEL`` (one of :data:`LOG_LEVELS`), or None when it is not set."""
    value = log_level_set()
    if not value:
        return None
    if value not in LOG_LEVELS:
        raise SettingError(sentence("{variable} must be one of {choices}, got {value}", variable=LOG_LEVEL,
                                    choices=", ".join(LOG_LEVELS), value=repr(value)))
    return value


def sandbox_without() -> set[str]:
    """``$GRADER_SANDBOX_WITHOUT``: the names in its comma-separated list."""
    return {n.strip() for n in os.environ.get(SANDBOX_WITHOUT, "").split(",") if n.strip()}


def gradescope_root() -> Path:
    """``$AUTOGRADER_ROOT``, else Gradescope's ``/autograder``."""
    from pathlib import Path  # here: a warm check's client imports this module, and not pathlib

    return Path(os.environ.get(GRADESCOPE_ROOT) or "/autograder")


def cache_home() -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache``."""
    from pathlib import Path  # here: a warm check's client imports this module, and not pathlib

    return Path(os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser())


def runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR`` (a folder of this user's, the systemd session's), or ``""``."""
    return os.environ.get("XDG_RUNTIME_DIR", "")


def matplotlib_config_dir() -> str:
    """``$MPLCONFIGDIR`` (matplotlib's own folder), or ``""``."""
    return os.environ.get("MPLCONFIGDIR", "")


def jupyter_session() -> str:
    """``$JPY_SESSION_NAME``: the notebook a Jupyter kernel was started for, or ``""``."""
    return os.environ.get("JPY_SESSION_NAME", "")
