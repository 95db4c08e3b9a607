"""`EnsembleScorer`: the members of a reward-model ensemble (`orchrm.rmodel.ensemble`)
loaded here, scoring each text once tokenized and read by every member; per item the
members' normalized rewards, their mean and spread, and the chosen aggregate as the
score that every consumer reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchrm.orchestration import replace_surrogates
from orchrm.rmodel.backbone import padding_side, rewards
from orchrm.rmodel.ensemble import (
    DEFAULT_AGGREGATE,
    check_aggregate,
    combine,
    ensemble_settings,
    member_dirs,
    normalized,
    spread,
)
from orchrm.rmodel.files import model_directory, read_metadata, saved_max_length
from orchrm.scoring.base import RenderingScorer, Scored
from orchrm.scoring.local import OrchRM


@dataclass
class EnsembleScorer(RenderingScorer):
    """K loaded members of one ensemble directory. `score` gives each item its
    `aggregate` of the members' normalized rewards as `Scored.score`, with `mean`,
    `spread` and `members` beside it; `tokens` counts what all K members read."""

    members: list[OrchRM]
    metadata: dict = field(default_factory=dict)
    aggregate: str = DEFAULT_AGGREGATE
    spread_weight: float = 1.0

    @classmethod
    def load(
        cls,
        path: str | Path,
        aggregate: str | None = None,
        spread_weight: float | None = None,
        **load,
    ) -> EnsembleScorer:
        """The members of the ensemble saved at `path` (a model directory whose
        `orchrm.json` has `ensemble`), each loaded as `OrchRM.load(member, **load)`; the
        aggregate and spread weight default to those stored with the ensemble."""
        top = model_directory(path)
        top_metadata = read_metadata(top)
        settings = ensemble_settings(top_metadata) or {}
        aggregate = aggregate or settings.get("aggregate", DEFAULT_AGGREGATE)
        weight = settings.get("spread_weight", 1.0) if spread_weight is None else spread_weight
        check_aggregate(aggregate, weight)
        count = int(settings.get("members", 0))
        # each member checked whole, of this rendering version, in the precision asked
        members = [OrchRM.load(d, **load) for d in member_dirs(top, count)]
        # Scores are on the members' common normalized scale: nothing to shift by.
        metadata = {**top_metadata, "reward_mean": 0.0, "reward_std": 1.0}
        return cls(members, metadata, aggregate, float(weight))

    @property
    def tokenizer(self):
        return self.members[0].tokenizer

    @property
    def max_length(self) -> int:
        return saved_max_length(self.metadata)

    @property
    def dtype(self) -> str:
        return self.members[0].dtype

    @property
    def device(self):
        return self.members[0].device

    @property
    def batch_size(self) -> int:
        """Texts per forward pass of each member."""
        return self.members[0].batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        for m in self.members:
            m.batch_size = value

    def score_texts(self, texts: list[str]) -> list[Scored]:
        """Each text tokenized once and read by every member; per text the members'
        normalized rewards combined by `aggregate`."""
        if not texts:
            return []
        clean = [replace_surrogates(t) for t in texts]
        encoded = self.tokenizer(clean, truncation=True, max_length=self.max_length)["input_ids"]
        per_member = []
        for m in self.members:
            raw = rewards(
                m.model,
                encoded,
                m.tokenizer.pad_token_id,
                m.batch_size,
                m.device,
                m.bf16,
                padding_side(m.model, m.tokenizer),
            )
            per_member.append([normalized(r, m.metadata) for r in raw])
        out = []
        for i, ids in enumerate(encoded):
            values = tuple(column[i] for column in per_member)
            out.append(
                Scored(
                    combine(values, self.aggregate, self.spread_weight),
                    len(ids) * len(self.members),
                    mean=sum(values) / len(values),
                    spread=spread(values),
                    members=values,
                )
            )
        return out
