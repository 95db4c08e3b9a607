"""Pipelines that string the library's stages together on the offline world:
world logs -> store -> pairs -> reward models (`world_models.py`), and `orchrm rl`'s
data (`rl_data.py`), run (`rl_pipeline.py`) and comparison (`rl_compare.py`).
"""
