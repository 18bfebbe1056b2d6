# The two commands are the whole set-up: `make demo` and `make test`; `make lint` is what CI checks first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint venv clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# giod with every extra (all: server, postgres, plots, display; and the rest), and the benchmarks
# (`giod bench`), both editable
$(STAMP): pyproject.toml benchmarks/pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[all,test,physics,pythia,dask,coffea,lint]' -e ./benchmarks
	touch $(STAMP)

venv: $(STAMP)

# The default leaves out the tests marked slow (a few minutes of simulation, browsers, soaks);
# GIOD_TEST_ALL=1 (set by .ci/run) or CI=true runs them too.
ALL_TESTS := $(or $(filter 1 true yes,$(GIOD_TEST_ALL)),$(filter true,$(CI)))
test: $(STAMP)
	$(PY) -m pytest -q $(if $(ALL_TESTS),,-m "not slow")

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

demo: $(STAMP)
	$(VENV)/bin/giod demo --force  # replaces the output of an earlier make demo

clean:
	rm -rf $(VENV) giod-data demo-output
