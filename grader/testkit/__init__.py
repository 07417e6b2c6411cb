"""What the hidden tests are written with: checks and tolerances (framework), the submission they ask (submission, calls), exercises graded alone (parts), where each lesson's tests are (lessons)."""
