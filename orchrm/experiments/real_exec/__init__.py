"""Orch-RM against majority vote with every plan executed by a real LLM (SmolLM2 on
llama.cpp): the study's settings, tasks and stages (`run.py`), its held-out evaluation
(`evaluate.py`), the seeded execution cache (`cache.py`) and the success tables that chose
its task mix (`tables.py`); `benchmarks/real_exec.py` runs it."""
