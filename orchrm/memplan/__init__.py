"""The memory planner of `orchrm train --plan`: the training shapes of a backbone
(`shapes.py`), measured peaks (`probe.py`), the plan (`plan.py`) and its text
(`text.py`).
"""
