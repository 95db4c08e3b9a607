"""`orchrm serve` under load: concurrent clients with hostile ones mixed in
(`loadgen.py`, run by `benchmarks/serve_load.py` and the GPU check)."""
