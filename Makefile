# dpfair developer commands. Each target bootstraps .venv itself on a fresh machine.
#   make demo    build the quick HTML report (median CIs, facility location, fair classification) into out/report
#   make test    ruff, mypy, then the test suite without the slow sweeps
#   make bench   timed comparisons (benchmarks/run.py)
#   make bench-facility   DPExpMed at n = 10^7 against numpy.sort and OpenDP (BENCH_ARGS="--n 1e6")
#   make bench-fairclass  CDP-Fair fit+predict at N = 9000 against diffprivlib + Fairlearn
#   make reproduce EXPERIMENT=median-width ARGS="--jobs 2"   a registered study (dpfair reproduce)
#   make lint    ruff + mypy only
#   make docs    build the documentation site into out/site (mkdocs build --strict)
#   make clean   remove build/test/report artefacts (make distclean also removes .venv)

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dpfair-dev-installed
REPORT_DIR ?= out/report
PYTEST_ARGS ?= -m "not slow" -n auto
BENCH_ARGS ?=
LINT_PATHS := src tests $(wildcard benchmarks) $(wildcard tools)

.PHONY: help install demo docs test lint bench bench-facility bench-fairclass reproduce clean distclean

help:
	@sed -n '2,11p' Makefile | sed 's/^#//'

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "dpfair needs Python >= 3.11; run e.g. make PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)

# Re-installs only when pyproject.toml changes (or the venv is new).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,dask,flower,docs]'
	@touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/dpfair report --quick --out $(REPORT_DIR)
	@echo "Report written: open file://$(abspath $(REPORT_DIR))/index.html"

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir out/site
	@echo "Site written: open file://$(abspath out/site)/index.html"

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/mypy

test: lint
	@rc=0; $(BIN)/python -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests were collected"; exit 0; fi; exit $$rc

bench: $(STAMP)
	@test -f benchmarks/run.py || { echo "benchmarks/run.py not found"; exit 1; }
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

bench-facility: $(STAMP)
	$(BIN)/python benchmarks/facility_bench.py $(BENCH_ARGS)

bench-fairclass: $(STAMP)
	$(BIN)/python benchmarks/fairclass_bench.py $(BENCH_ARGS)

EXPERIMENT ?= median-smoke
ARGS ?=
reproduce: $(STAMP)
	$(BIN)/dpfair reproduce $(EXPERIMENT) $(ARGS)

clean:
	rm -rf out build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis src/*.egg-info
	find . -path './.venv*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
