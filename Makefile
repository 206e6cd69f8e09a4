# The two commands on the README's first screen: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench chat-eval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pgmem demo

# Lint and types first (fast, and a red main is worse than a slow one); then pytest,
# which exits 5 when it collects no test: that is a failure of the suite, say so.
test: $(STAMP)
	$(BIN)/python -m ruff check pgmem tests benchmarks tools alembic
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$status

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_pack.py

# Opt-in, not part of test: eval-compaction --chat on a small slice against a real local
# model (tools/chat_eval.sh builds llama-cpp-python's server in .venv-chat on first use).
chat-eval: $(STAMP)
	PGMEM=$(BIN)/pgmem tools/chat_eval.sh --data-dir ../shared/data --out eval-out/compaction-chat \
		--caps 2000 --limit-conversations 1 --limit-questions 10 --ask end

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
