# Two entry points (see README): `make demo` runs the main job, `make test` the test suite.
# Both create .venv and install the package on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

$(VENV)/.bench: $(VENV)/.installed
	$(VENV)/bin/pip install -q -e '.[test,bench]'
	touch $@

.PHONY: demo test bench docs
demo: $(VENV)/.installed
	$(VENV)/bin/ctxwise replay

test: $(VENV)/.installed
	$(PY) -m mypy
	bash scripts/with-postgres.sh $(PY) -m pytest -q -n 2

bench: $(VENV)/.bench
	$(PY) bench/compare.py
	$(PY) bench/scale.py --profile
	$(PY) bench/memory.py
	$(PY) bench/store.py
	$(PY) bench/import_time.py

# the docs site into site/ (tests/test_docs.py builds it the same way, so `make test` covers it)
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d site
