"""Reward over-optimization in best-of-N on the world, where every plan's true success
probability is known: a trained reward-model ensemble's pick among N plans against N
(`study.py`), for one member, each aggregate and the averaged weights
(`benchmarks/overoptimization.py`)."""
