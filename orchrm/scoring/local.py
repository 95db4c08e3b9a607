"""`OrchRM`: a reward model loaded here, scoring batches of rendered texts (longest
first, padded per batch) in the precision `orchrm.scoring.precision` resolves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from orchrm.orchestration import RM_RENDER_VERSION, replace_surrogates
from orchrm.scoring.backbone import (
    ModelError,
    collate,
    load_backbone,
    model_directory,
    read_metadata,
)
from orchrm.scoring.base import RenderingScorer, Scored
from orchrm.scoring.precision import resolve_dtype


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
        bf16 or fp32; `orchrm.scoring.precision`). Refuses a model trained on
        another rendering version unless `check_version` is False, and a damaged or
        incomplete model directory (`DamagedModel`, naming the file)."""
        # Resolved first: a bad dtype or ORCHRM_BF16 costs no loading time.
        target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        use_bf16 = resolve_dtype(dtype, target) == "bf16"
        path = model_directory(path)
        metadata = read_metadata(path)
        version = metadata.get("render_version")
        if check_version and version and version != RM_RENDER_VERSION:
            raise ModelError(
                f"{path} was trained on rendering {version!r}; this orchrm "
                f"renders {RM_RENDER_VERSION!r}: retrain, or load with "
                "check_version=False"
            )
        model, tokenizer = load_backbone(str(path), trust_remote_code)
        model.to(target).eval()
        return cls(model, tokenizer, metadata, target, use_bf16, batch_size)

    @property
    def dtype(self) -> str:
        """The precision this model scores in: bf16 (autocast) or fp32."""
        return "bf16" if self.bf16 else "fp32"

    @property
    def max_length(self) -> int:
        return int(self.metadata.get("max_length", 512))

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
        )
        return [Scored(s, len(ids)) for s, ids in zip(scores, encoded, strict=True)]


@torch.inference_mode()
def rewards(
    model,
    sequences: list[list[int]],
    pad_id: int,
    batch_size: int,
    device: torch.device,
    bf16: bool,
) -> list[float]:
    """The reward of each token sequence, in input order: longest first in batches padded
    to their own longest member, under `inference_mode` (and bf16 autocast if asked)."""
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    out = [0.0] * len(sequences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        inputs = collate([sequences[i] for i in batch], pad_id)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(**{k: v.to(device) for k, v in inputs.items()}).logits
        for row, i in enumerate(batch):
            out[i] = float(logits[row, 0])
    return out
