"""Measuring best-of-N offline: the selectors an evaluation compares (`lineup.py`), the
tasks read from logs or a store (`loading.py`), re-executions on the world
(`reruns.py`), metrics with intervals (`metrics.py`), the calibration check
(`reliability.py`), the report and plots, cross-validation, the plan search measured on
the world (`search_study.py`), and the configs of `orchrm eval` and
`orchrm cross-validate`.
"""
