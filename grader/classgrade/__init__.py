"""Grading a whole class: find each notebook, grade it in its own worker, keep the record."""
