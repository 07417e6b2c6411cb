"""Shared helpers for the course: Chinese numeral readings and data utilities."""
