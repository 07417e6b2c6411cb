"""What every stage of the grader shares: hints, limits, CSV cells, student ids, the Jinja templates, the log."""
