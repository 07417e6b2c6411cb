"""``nbgrader zip_collect`` for LMS downloads: Canvas's names, and notebooks renamed on the way.

Canvas's *Download Submissions* zip names each file
``<lastfirst>_[LATE_]<user id>_<submission id>_<file name as uploaded>``, and a
resubmission's file name gets ``-1``, ``-2``... before ``.ipynb``; students' own downloads
add `` (1)``. nbgrader's stock ``FileNameCollectorPlugin`` takes the student id and file
name from ``named_regexp`` (``nbgrader_config.py`` sets :data:`CANVAS` for Canvas: the
student id is the Canvas user id, the ``ID`` column of Canvas's gradebook export); this
subclass then gives the notebook the lesson's own name (``01_attention_by_hand.ipynb``,
``01_attention_by_hand.zh.ipynb``) when its name shows the lesson, so that ``nbgrader
autograde`` finds it. Other files keep their names, and so does a second notebook of the
same lesson from one student (``python -m grader grade`` then sees both, and grades the
one worked on or reports them as ``ambiguous``).
"""

from __future__ import annotations

import re

from nbgrader.plugins import FileNameCollectorPlugin

from coursekit import catalogue

#: Canvas: ``.../doejane_LATE_123456_7890123_01_attention_by_hand-1.ipynb``. nbgrader
#: matches it against the whole path of each extracted file.
CANVAS = (r".*/(?P<last_first>[^/_]+)_(?:LATE_)?(?P<student_id>\d+)_(?P<submission_id>\d+)_"
          r"(?P<file_id>[^/]+)$")

_COPY = re.compile(r"(?:-\d+|\s*\(\d+\))+$")  # Canvas's resubmission, a browser's copy


def canonical_name(file_name: str) -> str:
    """``01_attention_by_hand (1).ipynb`` -> ``01_attention_by_hand.ipynb``, the name of a
    lesson's notebook (either edition); a name that is no lesson's is kept."""
    if not file_name.lower().endswith(".ipynb"):
        return file_name
    stem = _COPY.sub("", file_name[: -len(".ipynb")]).strip().lower()
    for lesson in catalogue.COURSE:
        for path in lesson.notebooks("student").values():
            if stem == path.name[: -len(".ipynb")].lower():
                return path.name
    return file_name


class CourseCollector(FileNameCollectorPlugin):
    """``FileNameCollectorPlugin`` whose notebooks keep the lesson's name (see above)."""

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if info:  # nbgrader keeps splitext(file_id)[0] + the file's own extension
            name = canonical_name(info["file_id"])
            taken: set[tuple[str, str]] = getattr(self, "_taken", set())
            if (info["student_id"], name) not in taken:  # two files, one name: nbgrader
                info["file_id"] = name                   # would refuse the whole zip
                taken.add((info["student_id"], name))
            self._taken = taken
        return info
