"""The GRPO comparison on a real LLM: SmolLM2 trained from one warm-up with Orch-RM's
reward or with execution as the reward (`run.py`), its settings (`config.py`), training
stages (`train.py`) and held-out evaluation (`evaluate.py`); `benchmarks/rl_real.py`
runs it."""
