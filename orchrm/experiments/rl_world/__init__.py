"""`orchrm rl` on the offline world: its settings (`config.py`), the data it starts from
(`data.py`), the run (`pipeline.py`) and the held-out comparison and report
(`compare.py`)."""
