"""`orchrm rl` on the offline world: its settings (`config.py`), the data it starts from
(`data.py`), the run (`pipeline.py`), the held-out evaluation and the training curve's
points (`evaluate.py`) and the comparison report (`compare.py`)."""
