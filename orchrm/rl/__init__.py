"""Orchestrator training with the reward model as the reward (GRPO), and its baselines.

`config` (one config class per method), `policy` (the offline default orchestrator LM),
`rewards` (Orch-RM and execution rewards with TRL's signature, token accounting),
`grpo`, `rft`, `dpo` (the methods), `verl_reward` (Orch-RM as a verl custom reward
function), `verl_loop` (verl's own reward loop run on it). The run on the offline world
is `orchrm.experiments.rl_world.pipeline`.
"""
