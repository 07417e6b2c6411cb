"""Grading one notebook, the trusted side: read it, start its worker, run the hidden tests."""
