# vedana: `make demo` runs the main job on embedded defaults, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint docs format bench clean

install: $(STAMP)

# torch is pinned to the local CPU wheel first: a bare `torch` would pull GBs of CUDA packages.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	VEDANA=$(BIN)/vedana bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest -q

# The README's command outputs are generated (scripts/readme_outputs.py): lint fails when they drift.
lint: install
	$(BIN)/ruff check src tests bench standins scripts
	$(BIN)/ruff format --check src tests bench standins scripts
	$(BIN)/mypy
	$(BIN)/python scripts/readme_outputs.py --check

# Rerun every command output README.md shows, on the samples, in throwaway homes (scripts/readme_examples.py).
docs: install
	$(BIN)/python scripts/readme_outputs.py

format: install
	$(BIN)/ruff format src tests bench standins scripts
	$(BIN)/ruff check --fix src tests bench standins scripts

bench: install
	$(BIN)/python -m bench

# The embedded servers outlive every command: stop them before their data dirs go.
clean:
	-for home in .vedana .vedana-demo; do \
		if [ -d $$home ] && [ -x $(BIN)/vedana ]; then VEDANA_HOME=$$home $(BIN)/vedana services stop; fi; \
	done
	rm -rf .vedana .vedana-demo .pytest_cache build dist src/*.egg-info
