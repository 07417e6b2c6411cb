"""Generated reference building blocks of earlier lessons (see coursekit.export)."""
