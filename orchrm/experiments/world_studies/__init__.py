"""The world benchmarks' studies (`benchmarks/rm_ceiling.py`, `rm_scaling.py`,
`world_headroom.py`, `rm_recipe.py`, `beyond_trained.py`, `decoder_backbone.py`): what
they compute (`measure.py`) and the perfect reader of the world's cues they set a reward
model against (`features_bt.py`)."""
