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

# the MCP reference server the prompts-and-resources tests run (Node.js; npm installs it once)
EVERYTHING := $(VENV)/mcp-everything/node_modules/@modelcontextprotocol/server-everything/package.json

$(EVERYTHING):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-fund --no-audit --prefix $(VENV)/mcp-everything \
	    @modelcontextprotocol/server-everything@2026.8.31; \
	else echo "npm not found: the MCP reference server's tests will say so and skip" >&2; fi

test: $(STAMP) $(EVERYTHING)
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
