"""nbgrader configuration of the course: reference notebooks in solutions/, student
notebooks generated into lessons/ (``nbgrader generate_assignment <lesson>``).

Each lesson may have two editions (``NN_name.ipynb``, ``NN_name.zh.ipynb``). A course
holds one of them, or both for students to choose: ``COURSE_EDITION=en`` (default), ``zh``
or ``both`` (see grader/nbgrader_editions.py and the README's instructors' section)."""

import os

from grader.nbgrader_editions import configure

c = get_config()  # noqa: F821 - provided by nbgrader

# Kernels started by nbgrader (validate, autograde) inherit this: long demonstrations, such
# as lesson 09's training run, use their small "smoke" preset while a notebook is graded.
os.environ.setdefault("COURSE_GRADING", "1")

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "lessons"
# Hidden test cells call grader.kernel.grade; give each notebook time to run and grade.
c.ExecutePreprocessor.timeout = 300
# Which edition's notebooks the course holds, which language the hints are in, and an
# export that counts a notebook's editions once.
configure(c)
