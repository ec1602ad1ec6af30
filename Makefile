# The documented way to install, test, lint, type-check and benchmark dsh-kernel.
PY ?= .venv/bin/python
VENV := .venv

.PHONY: install run test stress lint format typecheck bench clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/pip install -q -e '.[dev]'

# `make run`: the venv, the project with JupyterLab (the dev extra includes the lab extra), both
# kernelspecs in the venv, then JupyterLab on notebooks/. Setup is redone only when pyproject.toml
# changes. LAB_ARGS passes options to `jupyter lab` (e.g. LAB_ARGS="--port=9999 --no-browser").
LAB_ARGS ?=
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

$(VENV)/.dsh-setup: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -e '.[dev]'
	$(VENV)/bin/python -m dsh_kernel install --sys-prefix
	touch $@

run: $(VENV)/.dsh-setup
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ROOT_FLAG) $(LAB_ARGS)

test:
	$(PY) -m pytest -q

stress:
	$(PY) -m pytest -q -m stress tests/reliability

lint:
	$(PY) -m ruff check dsh_kernel tests benchmarks
	$(PY) -m ruff format --check dsh_kernel tests benchmarks

format:
	$(PY) -m ruff format dsh_kernel tests benchmarks
	$(PY) -m ruff check --fix dsh_kernel tests benchmarks

typecheck:
	$(PY) -m pyright

bench:
	$(VENV)/bin/pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/assembler_append.py
	$(PY) benchmarks/streaming.py
	$(PY) benchmarks/store.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache artifacts
