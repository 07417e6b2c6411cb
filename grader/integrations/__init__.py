"""The course's graders inside other platforms: nbgrader and Gradescope."""
