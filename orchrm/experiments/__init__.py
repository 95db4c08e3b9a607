"""The studies, a folder each, strung from the library's stages on the offline world or on
a real LLM, each stage reused while its inputs stay the same (`stages.py`; world logs to
reward models: `world_models.py`):

- `demo/`: `orchrm demo`, the whole story on the world;
- `real_exec/`: Orch-RM against majority vote with plans executed by SmolLM2;
- `rl_world/`: `orchrm rl`, orchestrator training on the world;
- `rl_real/`: the GRPO comparison on SmolLM2;
- `world_studies/`: the world benchmarks (ceiling, scaling, headroom, recipe, beyond argmax);
- `train_speed/`: orchrm's reward-model training against TRL's;
- `frameworks/`: verl's and OpenRLHF's own client code driving orchrm;
- `serve_load/`: `orchrm serve` under load;
- `gpu_check/`: the prepared GPU check.
"""
