# Two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench check-long experiments install clean golden mutate

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml setup.py chad/compile/_kernels.c
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m chad.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

$(VENV)/.installed-bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks

check-long: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m long tests

experiments: $(STAMP)
	$(BIN)/python -m experiments

# Recompute the golden step counts (tests/golden/corpus.json) of the stored programs;
# review the diff before committing it. A fresh set of programs:
# $(BIN)/python tests/golden/regenerate.py --new
golden: $(STAMP)
	$(BIN)/python tests/golden/regenerate.py

# Mutation testing of the cost and CHAD rules: slow, outside `make test`.
# Writes docs/mutation-report.md; MUTATE_BUDGET=<seconds> stops starting new files after
# that long (the files are run in order of importance: tools/mutate.sh).
$(VENV)/.installed-mutate: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,mutate]'
	touch $@

mutate: $(VENV)/.installed-mutate
	PY=$(BIN)/python bash tools/mutate.sh

clean:
	rm -rf $(VENV) build *.egg-info
