# vedana: `make demo` runs the main job on embedded defaults, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lock demo test lint docs format bench clean

install: $(STAMP)

# requirements.lock pins every package with its hash (scripts/lock.py); nothing is resolved here. uv installs it
# (requirements-uv.lock, taken first with pip); torch is the CPU build in /opt/wheels, pinned in the lock.
# --compile-bytecode: uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set every command
# compiled its imports again (litellm's alone for seconds).
$(STAMP): pyproject.toml requirements.lock requirements-uv.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements-uv.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --require-hashes --no-deps --compile-bytecode --find-links /opt/wheels -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Regenerate the locks after a change to pyproject.toml's dependencies (`make lint` fails until then); the pins
# stay where they are unless asked: make lock LOCK_ARGS="--upgrade-package litellm" (or --upgrade for all).
lock: install
	$(BIN)/python scripts/lock.py $(LOCK_ARGS)

demo: install
	VEDANA=$(BIN)/vedana bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest -q

# The README's command outputs are generated (scripts/readme_outputs.py): lint fails when they drift.
lint: install
	$(BIN)/python scripts/lock.py --check
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
