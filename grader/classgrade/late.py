"""Due dates, extensions and the late-penalty rule of a course, for both graders.

One file, ``deadlines.toml`` beside ``nbgrader_config.py``, says it all::

    timezone = "Europe/Paris"         # due dates without an offset are read in this zone

    [due]                             # per lesson
    01_attention_by_hand = "2026-03-02 23:59"

    [extensions]                      # per student: every lesson, or some lessons
    alice = "2 days"
    bob = { 01_attention_by_hand = "36 hours" }

    [penalty]
    per_day = 0.10                    # fraction of the raw score per day late (or part of one)
    max = 0.50                        # at most this fraction
    grace = "15 minutes"              # nothing within this much
    zero_after = "7 days"             # optional: later than this earns nothing

``python -m grader grade`` reads it (``--deadlines``, else the first ``deadlines.toml`` of
:func:`default_locations`: the current folder, the course folder that holds ``submitted/``,
the course's checkout beside ``nbgrader_config.py``) with
the ``timestamp.txt`` nbgrader writes beside each submission; nbgrader applies the same
rule through :class:`grader.integrations.nbgrader.late.CoursePenalty` (its ``LateSubmissionPlugin``
interface), once ``python -m grader deadlines`` has written the due dates and extensions
into its gradebook. Both report nbgrader's three numbers: ``raw_score``,
``late_submission_penalty`` and ``score`` (the raw score less the penalty).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from coursekit.errors import UserError
from grader import COURSE_ROOT
from grader.common import ids
from grader.i18n import Message, msg

DEFAULT_FILE = "deadlines.toml"
TIMESTAMP_FILE = "timestamp.txt"  # nbgrader's, beside the submitted notebook
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
          "hour": 3600, "d": 86400, "day": 86400, "w": 604800, "week": 604800}


def default_locations(submitted: Path) -> list[Path]:
    """Where ``grade`` looks for ``deadlines.toml`` when not told: the current folder, the
    folder above ``submitted/`` (nbgrader's course folder) and the course's checkout."""
    places = [Path.cwd(), Path(submitted).resolve().parent, COURSE_ROOT]
    return list(dict.fromkeys(p / DEFAULT_FILE for p in places))


def find_default(submitted: Path) -> Path | None:
    """The first ``deadlines.toml`` of :func:`default_locations`, or None."""
    return next((p for p in default_locations(submitted) if p.is_file()), None)


class DeadlineError(UserError, ValueError):
    """A deadlines file that cannot be used; ``str(exc)`` says why in a sentence."""


def parse_duration(text: str | int | float) -> timedelta:
    """``"2 days"``, ``"36 hours"``, ``"1 day 12 hours"``, ``"90 min"``; a number is days."""
    if isinstance(text, int | float):
        return timedelta(days=float(text))
    total, rest = 0.0, str(text).strip().lower()
    for number, unit in re.findall(r"([\d.]+)\s*([a-z]+)", rest):
        key = unit.rstrip("s") if unit.rstrip("s") in _UNITS else unit
        if key not in _UNITS:
            raise DeadlineError(msg("unknown unit {unit} in duration {text} (days, hours, minutes)", unit=repr(unit), text=repr(text)))
        total += float(number) * _UNITS[key]
    if not re.fullmatch(r"(\s*[\d.]+\s*[a-z]+\s*)+", rest):
        raise DeadlineError(msg("cannot read the duration {text} (e.g. \"2 days\", \"36 hours\")", text=repr(text)))
    return timedelta(seconds=total)


def parse_timestamp(text: str) -> datetime:
    """A timestamp as nbgrader writes and reads it (``2026-03-02 22:10:05.123456 UTC``,
    an offset, or none: UTC), as an aware UTC datetime (nbgrader's ``parse_utc``)."""
    try:
        from nbgrader.utils import parse_utc
    except ImportError:  # the same rule without nbgrader
        from dateutil import parser

        value = parser.parse(text)
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    try:
        return parse_utc(text).replace(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise DeadlineError(msg("cannot read the timestamp {text}: {error}", text=repr(text), error=exc)) from None


def read_timestamp(folder: Path) -> datetime | None:
    """The submission time nbgrader recorded in ``folder/timestamp.txt`` (None: none)."""
    path = folder / TIMESTAMP_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text:
        return None
    try:
        return parse_timestamp(text)
    except DeadlineError:
        return None


def format_utc(moment: datetime | None) -> str:
    """A moment as nbgrader writes it (``grades.csv``'s columns, records): UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


def format_local(moment: datetime | None, zone: str = "UTC") -> str:
    """A moment as a person reads it: in the course's timezone, named (``2026-03-03
    23:59:00 Asia/Shanghai``; ``... UTC`` for a course without one)."""
    return f"{moment.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M:%S} {zone}" if moment else ""


def format_duration(delta: timedelta) -> Message:
    """``1 day 11 hours``, ``14 hours 31 minutes``, ``5 minutes``: each shape one template
    of the catalogues (grader.i18n), so that the whole duration translates."""
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days and hours:
        return msg("{days} day{day_s} {hours} hour{hour_s}", days=days, day_s='s' * (days != 1), hours=hours, hour_s='s' * (hours != 1))
    if days:
        return msg("{days} day{day_s}", days=days, day_s='s' * (days != 1))
    if hours and minutes:
        return msg("{hours} hour{hour_s} {minutes} minute{minute_s}", hours=hours, hour_s='s' * (hours != 1), minutes=minutes, minute_s='s' * (minutes != 1))
    if hours:
        return msg("{hours} hour{hour_s}", hours=hours, hour_s='s' * (hours != 1))
    if minutes:
        return msg("{minutes} minute{minute_s}", minutes=minutes, minute_s='s' * (minutes != 1))
    return msg("{seconds} seconds", seconds=seconds)


@dataclass(frozen=True)
class Penalty:
    per_day: float = 0.0
    max: float = 1.0
    grace: timedelta = timedelta(0)
    zero_after: timedelta | None = None

    def fraction(self, late: timedelta) -> float:
        """The fraction of the raw score lost for handing in ``late``."""
        if late <= self.grace or late.total_seconds() <= 0:
            return 0.0
        if self.zero_after is not None and late > self.zero_after:
            return 1.0
        days = math.ceil(late.total_seconds() / 86400)
        return min(self.max, self.per_day * days)


@dataclass
class Lateness:
    """One submission against its due date: what ``grades.csv`` and the gradebook show."""

    submitted: datetime | None
    due: datetime | None  # the student's own (with any extension)
    late: timedelta
    fraction: float
    zone: str = "UTC"  # the course's timezone (deadlines.toml), in which times are shown

    def at(self, moment: datetime | None) -> str:
        return format_local(moment, self.zone)

    def penalty(self, raw_score: float) -> float:
        return round(raw_score * self.fraction, 4)

    def describe(self) -> Message:
        """One sentence, as the feedback page and ``grades.csv`` show it (and translate it:
        the sentence is the catalogue's template, so nothing may change it afterwards)."""
        if self.submitted is None:
            return msg("No submission time (no timestamp.txt): not counted as late.")
        if self.late.total_seconds() <= 0:
            return msg("On time (submitted {submitted}, due {due}).", submitted=self.at(self.submitted), due=self.at(self.due))
        lost = msg("penalty {fraction} of the raw score", fraction=format(self.fraction, '.0%')) if self.fraction else msg("no penalty")
        return (msg("{late_by} late (submitted {submitted}, due {due}): {lost}.", late_by=format_duration(self.late), submitted=self.at(self.submitted), due=self.at(self.due), lost=lost))


@dataclass
class Deadlines:
    """A course's ``deadlines.toml``."""

    source: str = ""
    timezone: str = "UTC"
    due: dict[str, datetime] = field(default_factory=dict)
    # student (grader.common.ids.key) -> lesson|"*" -> extension
    extensions: dict[str, dict[str, timedelta]] = field(default_factory=dict)
    rule: Penalty = field(default_factory=Penalty)

    def due_for(self, lesson: str, student: str) -> datetime | None:
        """The student's due date for ``lesson``: the lesson's, plus their extension."""
        due = self.due.get(lesson)
        if due is None:
            return None
        return due + self.extension(lesson, student)

    def extension(self, lesson: str, student: str) -> timedelta:
        granted = self.extensions.get(ids.key(student), {})
        return granted.get(lesson, granted.get("*", timedelta(0)))

    def lateness(self, lesson: str, student: str, submitted: datetime | None) -> Lateness:
        due = self.due_for(lesson, student)
        if submitted is None or due is None:
            return Lateness(submitted, due, timedelta(0), 0.0, self.timezone)
        late = max(submitted - due, timedelta(0))
        return Lateness(submitted, due, late, self.rule.fraction(late), self.timezone)

    def penalty_points(self, raw_score: float, seconds_late: float) -> float:
        """nbgrader's question: the points lost by a notebook ``seconds_late`` late (the
        extension is already in nbgrader's due date)."""
        return round(raw_score * self.rule.fraction(timedelta(seconds=seconds_late)), 4)


def _due(text: Any, zone: ZoneInfo, where: Message | str) -> datetime:
    if isinstance(text, datetime):
        value = text
    else:
        try:
            value = datetime.fromisoformat(str(text).strip())
        except ValueError:
            raise DeadlineError(msg("{where}: cannot read the date {text} (e.g. \"2026-03-02 23:59\")", where=where, text=repr(text))) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(UTC)


def parse(text: str, source: str = DEFAULT_FILE, lessons: list[str] | None = None) -> Deadlines:
    """Read a deadlines file's text; ``lessons``: the known lesson ids, to catch typos."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeadlineError(msg("{source}: not valid TOML ({error})", source=source, error=exc)) from None
    unknown = set(data) - {"timezone", "due", "extensions", "penalty"}
    if unknown:
        raise DeadlineError(msg("{source}: unknown setting(s) {unknown} (timezone, [due], [extensions], [penalty])", source=source, unknown=', '.join(sorted(unknown))))
    zone_name = str(data.get("timezone", "UTC"))
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise DeadlineError(msg("{source}: unknown timezone {zone_name} (e.g. \"Europe/Paris\")", source=source, zone_name=repr(zone_name))) from None
    deadlines = Deadlines(source, zone_name)
    for lesson, when in dict(data.get("due", {})).items():
        if lessons is not None and lesson not in lessons:
            raise DeadlineError(msg("{source}: [due] names {lesson}, not a lesson of the course", source=source, lesson=repr(lesson)))
        deadlines.due[lesson] = _due(when, zone, msg("{source} [due] {lesson}", source=source, lesson=lesson))
    for student, granted in dict(data.get("extensions", {})).items():
        per = granted if isinstance(granted, dict) else {"*": granted}
        for lesson in per:
            if lessons is not None and lesson != "*" and lesson not in lessons:
                raise DeadlineError(msg("{source}: [extensions] {student} names {lesson}, not a lesson of the course", source=source, student=student, lesson=repr(lesson)))
        student_id = ids.key(str(student))  # compared with folder names in one form
        if student_id in deadlines.extensions:
            raise DeadlineError(msg("{source}: [extensions] names {student} twice (once in another Unicode form)", source=source, student=ids.shown(str(student))))
        deadlines.extensions[student_id] = {k: parse_duration(v) for k, v in per.items()}
    rule = dict(data.get("penalty", {}))
    unknown = set(rule) - {"per_day", "max", "grace", "zero_after"}
    if unknown:
        raise DeadlineError(msg("{source}: unknown [penalty] setting(s) {unknown}", source=source, unknown=', '.join(sorted(unknown))))
    deadlines.rule = Penalty(
        per_day=float(rule.get("per_day", 0.0)), max=float(rule.get("max", 1.0)),
        grace=parse_duration(rule.get("grace", "0 s")),
        zero_after=parse_duration(rule["zero_after"]) if "zero_after" in rule else None)
    if not 0 <= deadlines.rule.per_day <= 1 or not 0 <= deadlines.rule.max <= 1:
        raise DeadlineError(msg("{source}: [penalty] per_day and max are fractions between 0 and 1", source=source))
    return deadlines


def load(path: str | Path, lessons: list[str] | None = None) -> Deadlines:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DeadlineError(msg("cannot read {path}: {error}", path=path, error=exc.strerror or exc)) from None
    return parse(text, str(path), lessons)
