"""The prepared GPU check (`check.py`, run by `benchmarks/gpu_check.py`; docs/gpu.md), its
reward-model training parts against TRL's (`training.py`) and what its parts share
(`work.py`)."""
