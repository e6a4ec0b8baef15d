PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo serve screenshots test lint typecheck pytest docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/convlog demo

# The viewer on the demo session (records it first when missing).
serve: $(STAMP)
	test -f convlog-demo.db || $(BIN)/convlog demo >/dev/null
	$(BIN)/convlog serve convlog-demo.db

# docs/img/viewer-*.png, taken in Debian's chromium (apt-get install chromium).
screenshots: $(STAMP)
	$(BIN)/python -m tests.support.screenshots docs/img

test: $(STAMP)
	$(BIN)/ruff check convlog.py engine projections tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest --durations=25

docs: $(STAMP)
	$(BIN)/python -m engine.docgen

bench: $(STAMP)
	$(BIN)/python benchmarks/replay.py

clean:
	rm -rf $(VENV) convlog-demo.db*
