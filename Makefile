# The documented way to set up, run, test, lint, type-check and benchmark dsh-kernel.
#
# Every target sets up what it needs on its own, from nothing: `make test` on a fresh clone builds
# `.venv`, installs the project with the `dev` extra and both kernelspecs, then runs the suite;
# `make run` installs only what a user needs (the project and the `lab` extra) and opens JupyterLab
# on a copy of the notebooks.
# Each extra has its own setup stamp in `.venv`, redone only when pyproject.toml or the notebook
# extension's sources change, so a second run is fast and the `make run` setup never stands in for
# the `make test` one. The notebook extension (widgets/) is built with npm once, and again when its
# sources (src/, style/, package.json, tsconfig.json) change, before the editable install copies the
# build into the venv; its npm dependencies are installed exactly as locked (`npm ci`) first. A source
# checkout needs Node ≥ 20.19 and npm; a wheel or sdist needs neither.
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.dsh-setup-lab
DEV_STAMP := $(VENV)/.dsh-setup-dev
BENCH_STAMP := $(VENV)/.dsh-setup-bench
NODE_DEPS := widgets/node_modules/.package-lock.json
WIDGET_SOURCES := $(wildcard widgets/src/* widgets/style/*) widgets/package.json widgets/tsconfig.json
WIDGET_BUILD := widgets/labextension/package.json

.PHONY: help setup-run setup-dev notebook-copy run mcp-servers test test-fast stress test-local lint format typecheck bench clean

# `make help` (also plain `make`): every target with its one line, read from the `## ` comment
# after the target's prerequisites.
.DEFAULT_GOAL := help
help: ## list the targets
	@awk -F ':.*## ' '/^[a-z-]+:.*## / { printf "  %-13s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The notebook extension's npm dependencies, as package-lock.json pins them. The build hook's own
# `npm install` then finds nothing to change.
$(NODE_DEPS): widgets/package-lock.json
	npm --prefix widgets ci --no-audit --no-fund --loglevel=error
	touch $@

# The notebook extension's build. Make, not the build hook, decides when it is stale: the hook only
# compares widgets/src with the build, so a change to widgets/style alone would go unbuilt. The
# editable install's hook then finds the build fresh and copies it into the venv.
$(WIDGET_BUILD): $(WIDGET_SOURCES) $(NODE_DEPS)
	npm --prefix widgets run build --silent
	touch $@

# One recipe for every extra: install the project editable with that extra (its build hook builds
# the notebook extension when widgets/src is newer than the build), put both kernelspecs into the
# venv (pointing at its own python), then stamp.
define setup
	$(PY) -m pip install -q -e '.[$(1)]'
	$(PY) -m dsh_kernel install --sys-prefix >/dev/null
	touch $@
endef

$(RUN_STAMP): pyproject.toml $(WIDGET_BUILD) | $(PY)
	$(call setup,lab)

$(DEV_STAMP): pyproject.toml $(WIDGET_BUILD) | $(PY)
	$(call setup,dev)

$(BENCH_STAMP): pyproject.toml $(WIDGET_BUILD) | $(PY)
	$(call setup,dev$(comma)bench)

comma := ,

setup-run: $(RUN_STAMP) ## set up .venv with the project and the lab extra (what `make run` needs)
setup-dev: $(DEV_STAMP) ## set up .venv with the project and the dev extra (tests, ruff, pyright)

# `make run`: JupyterLab on a working copy of notebooks/ (NOTEBOOK_COPY, git ignores it), so what a
# run writes — Lab's autosave of the outputs, .ipynb_checkpoints/, the files a notebook makes — never
# touches the tracked notebooks. `make notebook-copy` copies what is missing from the copy and keeps
# every file already there (a person's edits and outputs); deleting one brings the shipped one back.
# LAB_ARGS passes options to `jupyter lab` (e.g. LAB_ARGS="--port=9999 --no-browser").
NOTEBOOK_COPY ?= my-notebooks
LAB_ARGS ?=
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

notebook-copy: ## copy notebooks/ into my-notebooks/ (git ignores it), keeping every file already there
	@python3 -c 'import os, shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], \
	  dirs_exist_ok=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"), \
	  copy_function=lambda s, d: d if os.path.lexists(d) else shutil.copy2(s, d))' \
	  notebooks '$(NOTEBOOK_COPY)'
	@echo "make: the notebooks are in $(NOTEBOOK_COPY)/ (your copy: git ignores it; notebooks/ stays as shipped)"

run: $(RUN_STAMP) notebook-copy ## open JupyterLab on my-notebooks/, your copy of notebooks/ (LAB_ARGS passes options to jupyter lab)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir='$(NOTEBOOK_COPY)' $(LAB_ROOT_FLAG) $(LAB_ARGS)

# The suite in two runs, by tier (tests/conftest.py marks every test with its directory): first the
# tiers isolated per temporary directory, on two pytest-xdist workers (a whole file to a worker, so a
# file's shared kernel or Lab starts once per worker); then, alone, the tiers that must not share the
# machine with them: reliability (kill -9 timings, three kernels at once, its figures) and docs
# (`make run` reinstalls into this very .venv). The two lists are every tier but local (tests/unit/
# test_tiers.py checks it), so no test is left out; the second run goes on if the first fails.
# PYTEST_ARGS passes options to pytest (e.g. PYTEST_ARGS="-x -k budget").
PARALLEL_TIERS := unit integration kernel notebooks browser install
SERIAL_TIERS := reliability docs
FAST_TIERS := unit integration
XDIST := -n 2 --dist loadfile
PYTEST_ARGS ?=
empty :=
space := $(empty) $(empty)
# `$(call pytest_tiers,TIERS)`: the pytest arguments that run exactly those tiers' directories.
pytest_tiers = -m '($(subst $(space), or ,$(strip $(1)))) and not stress and not local' $(addprefix tests/,$(1))

# `make mcp-servers`: the reference MCP servers the MCP tests talk to (mcp-server-time, -git, -fetch:
# servers nobody here wrote), pip-installed from the package index into a venv of their own in a
# cache outside the repo (`tests/mcp_servers/reference.py`: $DSH_MCP_CACHE, else
# ~/.cache/dsh-kernel/mcp; about 100 MB), and each checked to answer the MCP handshake. The first
# run takes about half a minute; later runs find it in place and start nothing (well under a
# second), so `make test` and `make test-fast` run it first every time.
mcp-servers: | $(PY) ## build (or find in place) the cache of reference MCP servers the MCP tests talk to
	$(PY) -m tests.mcp_servers.reference >/dev/null

test: $(DEV_STAMP) mcp-servers ## run the suite (what CI runs after lint and typecheck), with each run's 25 slowest tests
	@status=0; \
	$(PY) -m pytest -q --durations=25 $(XDIST) $(call pytest_tiers,$(PARALLEL_TIERS)) $(PYTEST_ARGS) || status=$$?; \
	$(PY) -m pytest -q --durations=25 $(call pytest_tiers,$(SERIAL_TIERS)) $(PYTEST_ARGS) || status=$$?; \
	exit $$status

test-fast: $(DEV_STAMP) mcp-servers ## the fast loop: the unit and integration tiers only, on two workers
	$(PY) -m pytest -q --durations=10 $(XDIST) $(call pytest_tiers,$(FAST_TIERS)) $(PYTEST_ARGS)

stress: $(DEV_STAMP) ## run the long fault-injection tier (tests/reliability, -m stress)
	$(PY) -m pytest -q -m stress tests/reliability

# `make test-local`: the live tier against a real llama-cpp-python server. The first run builds
# llama-cpp-python from source and assembles the two models into the cache (`tests/local/models.py`:
# $DSH_LOCAL_CACHE, else ~/.cache/dsh-kernel/local; about 735 MB; 6–20 min on 2 cores);
# later runs verify the cache in seconds.
test-local: $(DEV_STAMP) ## run the live tier: real kernels against a real llama-cpp-python server (tests/local, -m local)
	$(PY) -m tests.local.models
	$(PY) -m pytest -q -m local tests/local

# The notebook extension's lint needs only its npm dependencies (eslint, prettier), not its build.
lint: $(DEV_STAMP) $(NODE_DEPS) ## ruff check (docstrings, complexity) and format --check over the Python; eslint and prettier --check over widgets/
	$(PY) -m ruff check dsh_kernel tests benchmarks
	$(PY) -m ruff format --check dsh_kernel tests benchmarks
	npm --prefix widgets run --silent lint
	npm --prefix widgets run --silent format:check

format: $(DEV_STAMP) $(NODE_DEPS) ## ruff format and ruff check --fix over the Python; prettier --write over widgets/
	$(PY) -m ruff format dsh_kernel tests benchmarks
	$(PY) -m ruff check --fix dsh_kernel tests benchmarks
	npm --prefix widgets run --silent format

typecheck: $(DEV_STAMP) ## pyright: strict over dsh_kernel, basic over tests and benchmarks
	$(PY) -m pyright

bench: $(BENCH_STAMP) ## run the side-by-side benchmarks in benchmarks/
	$(PY) benchmarks/assembler_append.py
	$(PY) benchmarks/turn_reader.py
	$(PY) benchmarks/streaming.py
	$(PY) benchmarks/long_session.py
	$(PY) benchmarks/store.py
	$(PY) benchmarks/kernel.py
	$(PY) benchmarks/overflow.py
	$(PY) benchmarks/images.py
	$(PY) benchmarks/shipping.py
	$(PY) benchmarks/tools.py
	$(PY) benchmarks/live_output.py
	$(PY) benchmarks/first_token.py
	$(PY) benchmarks/mcp_stop.py
	$(PY) benchmarks/rewind.py
	$(PY) benchmarks/capsule.py

clean: ## remove .venv, build outputs and caches (the notebook extension's node_modules and build too)
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache artifacts
	rm -rf widgets/node_modules widgets/lib widgets/labextension
