"""What a graded record becomes for people and platforms: reports, feedback, gradebook, LMS."""
