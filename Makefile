# Quick start:  make lab   (set up, then open the course in JupyterLab)
#               make test  (set up, then run the whole test suite)
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup lab test lint lessons

setup:
	$(PIP) install --quiet --disable-pip-version-check -e '.[dev]'

lab: setup
	$(PYTHON) -m jupyter lab lessons/

test: setup
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check grader coursekit tests benchmarks datasets

# Regenerate the student notebooks and the reference modules from solutions/.
lessons:
	for d in solutions/*/; do nbgrader generate_assignment "$$(basename $$d)" --force; done
	$(PYTHON) -m coursekit.export
