"""nbgrader configuration of the course: reference notebooks in solutions/, student
notebooks generated into lessons/ (``nbgrader generate_assignment <lesson>``)."""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "lessons"
# Hidden test cells call grader.kernel.grade; give each notebook time to run and grade.
c.ExecutePreprocessor.timeout = 300
