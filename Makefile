# The documented way to set up, run, test, lint, type-check and benchmark dsh-kernel.
#
# Every target sets up what it needs on its own, from nothing: `make test` on a fresh clone builds
# `.venv`, installs the project with the `dev` extra and both kernelspecs, then runs the suite;
# `make run` installs only what a user needs (the project and the `lab` extra) and opens JupyterLab.
# Each extra has its own setup stamp in `.venv`, redone only when pyproject.toml changes, so a second
# run is fast and the `make run` setup never stands in for the `make test` one.
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.dsh-setup-lab
DEV_STAMP := $(VENV)/.dsh-setup-dev
BENCH_STAMP := $(VENV)/.dsh-setup-bench

.PHONY: setup-run setup-dev run test stress lint format typecheck bench clean

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# One recipe for every extra: install the project editable with that extra, put both kernelspecs
# into the venv (pointing at its own python), then stamp.
define setup
	$(PY) -m pip install -q -e '.[$(1)]'
	$(PY) -m dsh_kernel install --sys-prefix >/dev/null
	touch $@
endef

$(RUN_STAMP): pyproject.toml | $(PY)
	$(call setup,lab)

$(DEV_STAMP): pyproject.toml | $(PY)
	$(call setup,dev)

$(BENCH_STAMP): pyproject.toml | $(PY)
	$(call setup,dev$(comma)bench)

comma := ,

setup-run: $(RUN_STAMP)
setup-dev: $(DEV_STAMP)

# `make run`: JupyterLab on notebooks/. LAB_ARGS passes options to `jupyter lab`
# (e.g. LAB_ARGS="--port=9999 --no-browser").
LAB_ARGS ?=
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

run: $(RUN_STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ROOT_FLAG) $(LAB_ARGS)

test: $(DEV_STAMP)
	$(PY) -m pytest -q

stress: $(DEV_STAMP)
	$(PY) -m pytest -q -m stress tests/reliability

lint: $(DEV_STAMP)
	$(PY) -m ruff check dsh_kernel tests benchmarks
	$(PY) -m ruff format --check dsh_kernel tests benchmarks

format: $(DEV_STAMP)
	$(PY) -m ruff format dsh_kernel tests benchmarks
	$(PY) -m ruff check --fix dsh_kernel tests benchmarks

typecheck: $(DEV_STAMP)
	$(PY) -m pyright

bench: $(BENCH_STAMP)
	$(PY) benchmarks/assembler_append.py
	$(PY) benchmarks/streaming.py
	$(PY) benchmarks/store.py
	$(PY) benchmarks/kernel.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache artifacts
