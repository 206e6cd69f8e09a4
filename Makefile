# The two commands on the README's first screen: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pgmem demo

# pytest exits 5 when it collects no test: that is a failure of the suite, say so.
test: $(STAMP)
	$(BIN)/python -m pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$status

lint: $(STAMP)
	$(BIN)/python -m ruff check pgmem tests benchmarks
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_pack.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
