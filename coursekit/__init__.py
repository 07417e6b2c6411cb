"""Public helpers the lessons import: datasets, reference building blocks, plotting."""
