# The two commands of the README. Each installs only what is missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
# The environment variable the app reads also picks the workspace for `make run`.
WORKSPACE ?= $(or $(CONCEPTLENS_WORKSPACE),data/demo)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-fast lint browser-deps demo clean

run: $(VENV)/.app-deps
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.headless true -- --workspace $(WORKSPACE)

test: $(VENV)/.dev-deps browser-deps lint
	$(PY) -m pytest -q -p no:cacheprovider

# Lint and format check (ruff; configuration in pyproject.toml). `ruff format .` fixes the format.
lint: $(VENV)/.dev-deps
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Everything but the real-browser tests and the slow ones.
test-fast: $(VENV)/.dev-deps lint
	$(PY) -m pytest -q -m "not browser and not slow" -p no:cacheprovider

demo: $(VENV)/.dev-deps
	$(PY) -m conceptlens.cli demo build --out $(WORKSPACE)

$(PY):
	$(PYTHON) -m venv $(VENV)

# The dashboard alone: what a deployment installs.
$(VENV)/.app-deps: requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

# The library with its pipeline and test extras.
$(VENV)/.dev-deps: pyproject.toml requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt -e '.[dev]'
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

clean:
	rm -rf $(VENV) tests/artifacts .pytest_cache
