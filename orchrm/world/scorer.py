"""A stand-in reward model that knows the offline world: it scores a plan by the log-odds
of its true success probability plus seeded normal noise. For measuring selection rules
(top-k votes, adaptive N, calibration) apart from how well a trained model ranks."""

from __future__ import annotations

import hashlib
import math
import random

from orchrm.world.generate import world_config
from orchrm.world.model import success_probability


class WorldScorer:
    """An `orchrm.scoring.base.Scorer` over plans, never texts: score = `scale` x (log-odds
    + N(0, `noise`), seeded by the plan) + `shift`; 10 input tokens a plan; a reward
    spread of 2 for `normalize`."""

    budget = (512, len)

    def __init__(self, world_tasks, noise: float = 0.5, scale: float = 1.0, shift: float = 0.0):
        self.by_question = {t.question: t for t in world_tasks}
        self.noise, self.scale, self.shift = noise, scale, shift
        self.metadata = {"reward_mean": 0.0, "reward_std": 2.0}
        self.config = world_config()

    def render(self, question, orchestration, domain="") -> str:
        return question

    def score_items_with_tokens(self, items, domains=None):
        scores = []
        for question, o in items:
            p = success_probability(self.by_question[question], o, self.config)
            p = min(max(p, 1e-4), 1 - 1e-4)
            seed = hashlib.md5(repr((question, o)).encode()).hexdigest()
            z = math.log(p / (1 - p)) + random.Random(seed).gauss(0, self.noise)
            scores.append(self.scale * z + self.shift)
        return scores, [10] * len(items)

    def score_batch(self, items):
        return self.score_items_with_tokens(items)[0]

    def score_texts_with_tokens(self, texts):
        raise TypeError("the world scorer scores plans, not rendered texts")

    def normalize(self, scores):
        mean, std = self.metadata["reward_mean"], self.metadata["reward_std"]
        return [None if s is None else (s - mean) / std for s in scores]
