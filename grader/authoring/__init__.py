"""For the people who write the course: lessons from solutions, editions, releases."""
