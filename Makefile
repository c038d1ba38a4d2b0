# Two entry points: `make chat` (install and start glassloop) and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: chat test lint bench reliability clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[local,mcp,otel,dev]'
	touch $(STAMP)

chat: $(STAMP)
	$(VENV)/bin/glassloop

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check repl tools tests bench
	$(VENV)/bin/mypy  # files and options: [tool.mypy] in pyproject.toml

reliability: $(STAMP)
	GLASSLOOP_RELIABILITY_FULL=1 $(PY) -m pytest tests/reliability

bench: $(STAMP)
	$(PY) -m bench all

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
