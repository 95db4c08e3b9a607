"""A stand-in reward model that knows the offline world: it scores a plan by the log-odds
of its true success probability plus seeded normal noise. For measuring selection rules
(top-k votes, adaptive N, calibration) apart from how well a trained model ranks."""

from __future__ import annotations

import hashlib
import math
import random

from orchrm.scoring.base import ModelInfo, Scored
from orchrm.world.generate import world_config
from orchrm.world.model import success_probability


class WorldScorer:
    """An `orchrm.scoring.base.Scorer` over plans, never texts: score = `scale` x (log-odds
    + N(0, `noise`), seeded by the plan and `seed`) + `shift`; 10 input tokens a plan; a
    reward spread of 2 for `ModelInfo.normalize`. Stand-ins of other seeds err
    independently: an ensemble of them."""

    def __init__(
        self,
        world_tasks,
        noise: float = 0.5,
        scale: float = 1.0,
        shift: float = 0.0,
        seed: int = 0,
    ):
        self.by_question = {t.question: t for t in world_tasks}
        self.noise, self.scale, self.shift, self.seed = noise, scale, shift, seed
        self.metadata = {"reward_mean": 0.0, "reward_std": 2.0}
        self.config = world_config()

    @property
    def info(self) -> ModelInfo:
        """Its reward statistics (and any calibration put in `metadata`); nothing renders."""
        return ModelInfo(self.metadata)

    def score(self, items) -> list[Scored]:
        """A `Scored` per (question, plan[, domain]) item, in input order."""
        out = []
        for item in items:
            question, o = item[0], item[1]
            p = success_probability(self.by_question[question], o, self.config)
            p = min(max(p, 1e-4), 1 - 1e-4)
            key = (question, o) if not self.seed else (self.seed, question, o)
            seed = hashlib.md5(repr(key).encode()).hexdigest()
            z = math.log(p / (1 - p)) + random.Random(seed).gauss(0, self.noise)
            out.append(Scored(self.scale * z + self.shift, 10))
        return out
