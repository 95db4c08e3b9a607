"""The saved reward model, below training and scoring alike: a backbone loaded, a saved
model loaded to compute rewards, token counting and batched rewards (`backbone.py`), its
directory's files and their checks (`files.py`), the [CLS]-only last layer
(`last_layer.py`), the precision it computes in (`precision.py`) and its model card
(`card.py`).
"""
