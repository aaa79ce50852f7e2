# The two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv at the repository root and install the workspace the first time.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.prism-installed
MANIFESTS := pyproject.toml prism_core/pyproject.toml prism_store_sql/pyproject.toml \
	prism_store_redis/pyproject.toml $(wildcard plugins/*/pyproject.toml)

# Every distribution `make dist` builds: the meta distribution at the root, the kernel, the
# stores and each plugins/* directory (new plugin distributions are picked up by the wildcard).
DISTS := . prism_core prism_store_sql prism_store_redis \
	$(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))

.PHONY: install browser demo test test-long lint check bench dist clean

install: $(STAMP)

$(STAMP): $(MANIFESTS)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Prism needs Python 3.11 or newer; set PYTHON=/path/to/python3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e prism_core -e 'prism_store_sql[sqlite,postgres]' -e prism_store_redis \
		$(foreach p,$(wildcard plugins/*),-e $(p)) -e '.[dev]'
	@touch $(STAMP)

demo: install
	$(VENV)/bin/prism demo $(DEMO_ARGS)

# Debian's Chromium for the console's browser tests (installed once when missing).
browser:
	@.ci/chromium.sh

# Everything but the long crash and scale loops (marked ``long``); those run in test-long.
# One test process per CPU (TEST_WORKERS=0 runs them in this process); a module's tests stay
# on one worker so its servers and fixtures start once.
TEST_WORKERS ?= auto
test: install browser
	$(PY) -m pytest -m "not long" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-long: install
	$(PY) -m pytest -m long $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

check: lint test

# bench/targets.py last: every speed target PASS/FAIL over three runs, exit status 1 when one
# is missed (BENCH_ARGS=--quick: one short run, or PRISM_BENCH_QUICK=1).
bench: install
	$(PY) bench/stores.py
	$(PY) bench/durable.py
	$(PY) bench/reopen.py
	$(PY) bench/targets.py $(BENCH_ARGS)

# Wheels and sdists of every distribution in dist/, for
# pip install --find-links dist 'prism-runtime[sql,redis]' (see README: installing from a checkout).
dist: install
	rm -rf dist
	$(foreach d,$(DISTS),$(PY) -m build --no-isolation --sdist --wheel --quiet --outdir dist $(d) &&) true
	@ls dist

clean:
	rm -rf $(VENV) dist
