SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

# dfs-cer: `make demo` runs the main job, `make test` runs lint, type checks and tests.
# Both create .venv, install what they need (Java for Spark too) and are idempotent.
# `make help` lists the targets (each target's `## ` comment is its line there).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: help install java test lint unit docs release-check demo fuzz clean
.DEFAULT_GOAL := install

help: ## list the targets
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

install: $(STAMP) java ## create .venv with every extra (and Java for Spark)

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "dfs-cer needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --upgrade pip 2>&1 | { grep -v '^WARNING: Location' || true; }
	@# the build backend warns of editable installs at length (a box of stars): not news here
	PYTHONWARNINGS="ignore:Editable installation" $(PIP) install -e ".[all]" 2>&1 | { grep -v '^WARNING: Location' || true; }
	$(BIN)/python -c "import dfs_cer, pyspark, pyarrow, sqlglot"
	@# byte-compile the sources (a first command would compile them) and the engines into
	@# numba's cache (a first query would wait for them)
	$(BIN)/python -m compileall -q dfs_cer storage_node spark_jobs pyspark_dfs_cer
	$(BIN)/python -m dfs_cer.warm
	@# spark-submit from this venv logs errors only (its --verbose / --conf spark.log.level=INFO bring the log back)
	d=$$($(BIN)/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/conf && mkdir -p $$d \
	  && cp dfs_cer/spark/log4j2.properties $$d/log4j2.properties
	touch $(STAMP)

java: ## make sure a Java runtime for Spark is there
	@scripts/ensure-java.sh

lint: install ## ruff (lint and format), mypy and the import-linter contracts (layers, no cycles)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: install ## the tests (pytest)
	$(BIN)/pytest

test: lint unit docs release-check ## lint, the tests, the docs, the release check (what CI runs)

docs: install ## build the documentation site into site/ (mkdocs, strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

release-check: install ## build the wheel and sdist, run the demo from the wheel in a fresh venv
	PYTHON=$(PYTHON) scripts/check-release.sh

demo: install ## the embedded demo: sample data, three storage nodes, Spark, a query
	$(BIN)/dfs-cer demo

# the differential fuzzer's long profile (CI runs the quick one inside make test)
fuzz: install ## the differential fuzzer's long profile
	$(BIN)/python bench/fuzz.py

clean: ## remove .venv and the tools' caches
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache *.egg-info
