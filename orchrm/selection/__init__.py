"""Choosing one of N orchestrations before any runs: the selectors
(`selectors.py`), the LLM judges (`judges.py`), the predicted cost of a plan
(`cost.py`), one entry per selector (`registry.py`) and the reward-model selectors'
settings (`options.py`). `orchrm serve` and the evaluation both use it.
"""
