"""Generated reference code of the lessons (see grader.authoring.generate and coursekit.earlier)."""
