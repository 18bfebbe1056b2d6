# The two commands are the whole set-up: `make demo` and `make test`; `make lint` is what CI checks first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint venv clean

# Every step says what it does: a first install takes minutes, and a silent one looks hung.
# uv (from the package index, into the venv) installs several times faster than pip; where it
# cannot be had, pip does the same install.
$(VENV)/bin/python:
	@echo "== 1/3 creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "== 2/3 installing uv, the fast installer (pip if it cannot be had)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off uv || echo "uv not available: pip installs"

# giod with every extra (all: server, postgres, plots, display; and the rest), and the benchmarks
# (`giod bench`), both editable
PACKAGES := -e '.[all,test,physics,pythia,dask,coffea,lint]' -e ./benchmarks
$(STAMP): pyproject.toml benchmarks/pyproject.toml | $(VENV)/bin/python
	@echo "== 3/3 installing giod with every extra, and the benchmarks (a few minutes the first time)"
	@if $(PY) -m uv --version >/dev/null 2>&1; then \
		echo "$(PY) -m uv pip install --compile-bytecode --python $(PY) $(PACKAGES)"; \
		$(PY) -m uv pip install --compile-bytecode --python $(PY) $(PACKAGES) || { \
			echo "uv could not install (its index settings are not pip's): pip installs"; \
			$(PY) -m pip install --disable-pip-version-check --progress-bar off $(PACKAGES); }; \
	else \
		echo "$(PY) -m pip install --progress-bar off $(PACKAGES)"; \
		$(PY) -m pip install --disable-pip-version-check --progress-bar off $(PACKAGES); \
	fi
	@echo "== installed"
	touch $(STAMP)

venv: $(STAMP)

# The default leaves out the tests marked slow (a few minutes of simulation, browsers, soaks);
# GIOD_TEST_ALL=1 (set by .ci/run) or CI=true runs them too.
ALL_TESTS := $(or $(filter 1 true yes,$(GIOD_TEST_ALL)),$(filter true,$(CI)))
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): without
# it every process the tests start (CLIs, writers, Dask workers, servers) compiles giod and its
# dependencies from source again, seconds of CPU each. uv is told to compile at install for
# the same reason (pip does by default).
BYTECODE := PYTHONDONTWRITEBYTECODE=
# The tests run in one process per core, at most four (pytest-xdist): each process makes the session's
# fixtures again (a PostgreSQL database, servers, a Dask cluster of two workers). TEST_WORKERS=0 runs
# them in this one process. Tests that share a costly fixture run in one process (tests/conftest.py).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
test: $(STAMP)
	$(BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(if $(ALL_TESTS),,-m "not slow")

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

demo: $(STAMP)
	$(BYTECODE) $(VENV)/bin/giod demo --force  # replaces the output of an earlier make demo

clean:
	rm -rf $(VENV) giod-data demo-output
