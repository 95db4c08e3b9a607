"""Orchestrator training with the reward model as the reward (GRPO), and its baselines.

`policy` (the offline default orchestrator LM), `rewards` (Orch-RM and execution rewards
with TRL's signature, token accounting), `grpo`, `rft`, `dpo` (the methods), `evaluate`
(held-out accuracy, curve, report), `data` (world logs, prompts, reward model, pairs),
`pipeline` (`orchrm rl`), `verl_reward` (Orch-RM as a verl custom reward function).
"""
