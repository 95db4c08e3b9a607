"""Training a Bradley-Terry reward model on win/lose pairs: `TrainConfig`
(`config.py`), pair data (`data.py`), batch order (`batching.py`), the loss, the model
to optimize (`build.py`), the loop (`train.py`) with its checkpoints, processes,
throughput, summary and held-out evaluation.
"""
