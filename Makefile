# Quick start:  make lab   (set up, then open the course in JupyterLab)
#               make test  (set up, then run the whole test suite)
#               make check (lint, types and the fast tests, nothing installed)
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup lab test check lint typecheck lessons editions translations smoke

setup:
	$(PIP) install --quiet --disable-pip-version-check -e '.[dev]'

# JupyterLab refuses to run as root unless told to (containers, CI machines).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: setup
	$(PYTHON) -m jupyter lab $(ROOT_FLAG) lessons/

# Two or more workers (pytest-xdist, one per core), each taking whole files: tests in a file
# share module fixtures and run in order. The files go out in collection order, slow ones
# first (tests/conftest.py), not xdist's most-tests-first. `python -m pytest` alone runs the
# same tests serially.
test: setup
	$(PYTHON) -m pytest -n auto --dist loadfile --no-loadscope-reorder

# The inner loop while you change the code: lint, types and the fast tests (no pip install;
# run `make setup` once). `make test` runs everything.
check: lint
	$(PYTHON) -m pytest -n auto --dist loadfile --no-loadscope-reorder -q -m "not slow and not e2e and not browser"

# A minute's check that this machine grades: every lesson's reference notebook full marks,
# its student notebook zero, in the sandbox (python -m grader selftest).
smoke:
	$(PYTHON) -m grader selftest

# ruff, then the type checker (mypy: [tool.mypy] in pyproject.toml says what it checks)
lint:
	$(PYTHON) -m ruff check grader coursekit tests benchmarks datasets
	$(MAKE) --no-print-directory typecheck

typecheck:
	$(PYTHON) -m mypy

# The authors' tools (python -m grader.authoring generate|editions|i18n ...):
# regenerate the student notebooks and the reference modules from solutions/ (every lesson
# of coursekit/catalogue.py) ...
lessons:
	$(PYTHON) -m grader.authoring generate --assignments

# ... what each lesson's second edition needs translating (sync: `python -m grader.authoring
# editions sync NN`) ...
editions:
	$(PYTHON) -m grader.authoring editions status

# ... and the hints' translations: new sentences in, stale ones out, the coverage.
translations:
	$(PYTHON) -m grader.authoring i18n sync
	$(PYTHON) -m grader.authoring i18n status
