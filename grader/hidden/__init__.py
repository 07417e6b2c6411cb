"""Hidden graders: one pytest module per lesson, ``test_<lesson>.py``."""
