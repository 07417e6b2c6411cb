"""How a result is shown to people and platforms: ``check``'s report and the feedback page
(``render``), the class report, feedback handed back, the gradebook, LMS files."""
