# The documented way to install, test, lint, type-check and benchmark dsh-kernel.
PY ?= .venv/bin/python
VENV := .venv

.PHONY: install test lint format typecheck bench clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/pip install -q -e '.[dev]'

test:
	$(PY) -m pytest -q

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
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache
