"""Pipelines that string the library's stages together on the offline world, each stage
reused while its inputs stay the same (`stages.py`): world logs -> store -> pairs ->
reward models (`world_models.py`) -> best-of-N; the demo (`demo.py`), `orchrm rl`'s
data (`rl_data.py`), run (`rl_pipeline.py`) and comparison (`rl_compare.py`); the world
benchmarks' studies (`world_studies.py`, `features_bt.py`, `train_speed.py`); verl's
reward loop and OpenRLHF's client driven on the world's plans (`frameworks.py`); the
demo's pipeline on real executions (`real_exec.py`); the prepared GPU check (`gpu_check.py`,
`gpu_work.py`).
"""
