SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

# dfs-cer: `make demo` runs the main job, `make test` runs lint, type checks and tests.
# Both create .venv, install what they need (Java for Spark too) and are idempotent.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: install java test lint unit demo fuzz clean

install: $(STAMP) java

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "dfs-cer needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --upgrade pip 2>&1 | { grep -v '^WARNING: Location' || true; }
	$(PIP) install -e ".[all]" 2>&1 | { grep -v '^WARNING: Location' || true; }
	$(BIN)/python -c "import dfs_cer, pyspark, pyarrow, sqlglot"
	@# spark-submit from this venv logs errors only (its --verbose / --conf spark.log.level=INFO bring the log back)
	d=$$($(BIN)/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/conf && mkdir -p $$d \
	  && cp dfs_cer/spark/log4j2.properties $$d/log4j2.properties
	touch $(STAMP)

java:
	@scripts/ensure-java.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

test: lint unit

demo: install
	$(BIN)/dfs-cer demo

# the differential fuzzer's long profile (CI runs the quick one inside make test)
fuzz: install
	$(BIN)/python bench/fuzz.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
