"""`OrchRM`: a reward model loaded here, scoring batches of rendered texts (longest
first, padded per batch) in the precision `orchrm.rmodel.precision` resolves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from orchrm.orchestration import replace_surrogates
from orchrm.rmodel.backbone import load_saved, padding_side, rewards
from orchrm.rmodel.files import saved_max_length
from orchrm.rmodel.last_layer import read_first_position_only
from orchrm.scoring.base import RenderingScorer, Scored


@dataclass
class OrchRM(RenderingScorer):
    """A loaded reward model that scores (question, orchestration) before anything runs.

    `score` renders each item with `render_for_rm` (the budget the model was trained
    with), sorts by length, pads per batch, and returns a `Scored` per item in input
    order. Unparseable harmony text gets a `None` score.
    """

    model: object
    tokenizer: object
    metadata: dict = field(default_factory=dict)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    bf16: bool = False
    batch_size: int = 32

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str | None = None,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        check_version: bool = True,
        batch_size: int = 32,
    ) -> OrchRM:
        """Load a saved reward model, or any sequence-classification model directory
        used off the shelf (then without orchrm metadata), to score in `dtype` (auto,
        bf16 or fp32; `orchrm.rmodel.precision`): `orchrm.rmodel.backbone.load_saved`,
        which refuses a model trained on another rendering version unless
        `check_version` is False, and a damaged or incomplete model directory
        (`DamagedModel`, naming the file)."""
        saved = load_saved(path, device, dtype, trust_remote_code, check_version)
        read_first_position_only(saved.model)  # a [CLS] reader's last layer at [CLS] alone
        return cls(
            saved.model, saved.tokenizer, saved.metadata, saved.device, saved.bf16, batch_size
        )

    @property
    def dtype(self) -> str:
        """The precision this model scores in: bf16 (autocast) or fp32."""
        return "bf16" if self.bf16 else "fp32"

    @property
    def max_length(self) -> int:
        return saved_max_length(self.metadata)

    def score_texts(self, texts: list[str]) -> list[Scored]:
        """Raw reward and input tokens of each text (already rendered), in input order,
        from one tokenization: the tokens are what the model read, special tokens
        included, so they are the verification cost of scoring the text."""
        if not texts:
            return []
        clean = [replace_surrogates(t) for t in texts]  # tokenizers reject lone surrogates
        encoded = self.tokenizer(clean, truncation=True, max_length=self.max_length)["input_ids"]
        scores = rewards(
            self.model,
            encoded,
            self.tokenizer.pad_token_id,
            self.batch_size,
            self.device,
            self.bf16,
            padding_side(self.model, self.tokenizer),
        )
        return [Scored(s, len(ids)) for s, ids in zip(scores, encoded, strict=True)]
