"""nbgrader with the course's sandbox, editions, late rule and LMS downloads."""
