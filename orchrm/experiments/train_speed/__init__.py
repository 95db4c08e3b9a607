"""orchrm's reward-model training loop against TRL's `RewardTrainer` (`compare.py`,
run by `benchmarks/rm_train.py`)."""
