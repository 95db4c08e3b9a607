"""Orch-RM against majority vote with every plan executed by a real LLM (SmolLM2 on
llama.cpp): the study's stages and run (`run.py`), its settings and server
(`settings.py`), its tasks and training plans (`tasks.py`), its held-out evaluation
(`evaluate.py`), the seeded execution cache (`cache.py`), and the calibration
(`calibrate.py`) and success tables (`tables.py`) that chose its task mix;
`benchmarks/real_exec.py` runs it."""
