"""The prepared GPU check (`check.py`, run by `benchmarks/gpu_check.py`; docs/gpu.md) and
what its parts share (`work.py`)."""
