# The two entry points a newcomer needs: `make demo` and `make test`.
# Each one creates .venv/ (if missing) and installs orchrm with its test extras.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-slow lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

# The most complete pipeline that exists so far: parse the real MAS-Orchestra logs,
# then generate the offline world's logs and print its ground-truth statistics.
demo: $(STAMP)
	$(BIN)/orchrm parse ../shared/data/mas_orchestra/masbench_depth2_step60.jsonl ../shared/data/mas_orchestra/masbench_depth2_step180.jsonl
	COLUMNS=120 $(BIN)/orchrm world stats --tasks 300 --samples 8

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/ruff check .
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
