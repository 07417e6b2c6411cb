"""Generated reference code of the lessons (see grader.authoring and coursekit.earlier)."""
