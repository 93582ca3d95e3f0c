# The two commands of the README. Both create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_DEPS := $(VENV)/.run-deps
TEST_DEPS := $(VENV)/.test-deps
PORT ?= 8501
# Test workers: one per core, each running whole test files (README); TEST_WORKERS=0 runs the
# suite in one process.
TEST_WORKERS ?= 2

.PHONY: run test bench chromium clean

run: $(RUN_DEPS)
	$(BIN)/streamlit run Home.py --server.port $(PORT)

test: $(TEST_DEPS) chromium
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

bench: $(TEST_DEPS) chromium
	$(BIN)/python -m bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_DEPS): requirements.txt | $(BIN)/python
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	touch $@

$(TEST_DEPS): requirements-dev.txt $(RUN_DEPS)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

# Browser tests drive Debian's chromium (Playwright's own download does not work here).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
