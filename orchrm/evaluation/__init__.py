"""Measuring best-of-N offline: the selectors an evaluation compares
(`lineup.py`), re-executions on the world (`reruns.py`), metrics with intervals
(`metrics.py`), the calibration check (`reliability.py`), the report and plots,
cross-validation, and the configs of `orchrm eval` and `orchrm cross-validate`.
"""
