"""The Bradley-Terry loss of one micro-batch of win/lose pairs."""

from __future__ import annotations

from typing import NamedTuple

import torch

from orchrm.rmodel.backbone import collate
from orchrm.rmodel.packed import packed_rewards, packs
from orchrm.training.batching import text_passes


class PairLoss(NamedTuple):
    """`pair_loss` of one micro-batch."""

    losses: torch.Tensor
    """The loss of each pair."""
    diff: torch.Tensor
    """Each pair's chosen minus rejected reward (less its margin)."""
    texts: list[list[int]]
    """The token sequences the model computed (each distinct text once, `computed`)."""


def _scores(
    model,
    sequences: list[list[int]],
    *,
    pad_id: int,
    device,
    passes: int,
    side: str = "right",
    join: bool = True,
):
    """(one reward per text, in `sequences`' order; the texts computed): each distinct
    text computed once (`computed`), in one packed row for a model that packs
    (`orchrm.rmodel.packed`), else in the forward passes of `text_passes` (each padded on
    `side` to its own longest text; `join` as there) within one autograd graph."""
    if packs(model):
        texts, where = computed(sequences, 1, join)
        scores = packed_rewards(model, texts, device)
    else:
        texts, where = computed(sequences, passes, join)
        cuts = text_passes([len(s) for s in texts], passes, join)
        parts = []
        for cut in cuts:
            batch = collate([texts[i] for i in cut], pad_id, side)
            inputs = {k: v.to(device) for k, v in batch.items()}
            parts.append(model(**inputs).logits.squeeze(-1).float())
        order = torch.tensor([i for cut in cuts for i in cut], device=parts[0].device)
        scores = torch.cat(parts)[torch.argsort(order)]
    if len(texts) == len(sequences):
        return scores, texts
    return scores[torch.tensor(where, device=scores.device)], texts


def computed(
    sequences: list[list[int]], passes: int, join: bool
) -> tuple[list[list[int]], list[int]]:
    """(the texts a micro-batch computes, the index of each of `sequences` among them):
    the `distinct` ones, in at most `passes` forward passes; where passes are not joined
    (processes that must each run as many passes, `text_passes`), every text when fewer
    distinct ones would make fewer passes."""
    texts, where = distinct(sequences)
    if not join and len(texts) < min(passes, len(sequences)):
        return sequences, list(range(len(sequences)))
    return texts, where


def distinct(sequences: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """(the distinct token sequences, in first-seen order; for each of `sequences`, the
    index of its own among them). A text in several pairs of a micro-batch (a plan beaten
    by two others, or beating two) is computed once and its reward used by each pair:
    the gradient of the summed loss is the same as with one copy per pair (with dropout,
    the copies share one mask)."""
    index: dict[tuple[int, ...], int] = {}
    texts, where = [], []
    for s in sequences:
        key = tuple(s)
        if key not in index:
            index[key] = len(texts)
            texts.append(s)
        where.append(index[key])
    return texts, where


def pair_loss(
    model,
    sequences: list[list[int]],
    margins: list[float] | None,
    *,
    pad_id: int,
    device,
    center_rewards: float | None,
    passes: int = 1,
    side: str = "right",
    join: bool = True,
    weights: list[float] | None = None,
) -> PairLoss:
    """Bradley-Terry loss of each pair of one micro-batch: `sequences` holds the chosen
    texts then the rejected ones, scored in at most `passes` forward passes sorted by
    length (`orchrm.training.batching.text_passes`, `join` as there) and padded on `side`
    (`orchrm.rmodel.backbone.padding_side`); returns the loss per pair (their mean is the
    batch's loss), chosen - rejected, and the texts computed (`PairLoss`).

    `weights` are soft labels, each the probability w that the chosen side is the better:
    -(w log sigmoid(d) + (1 - w) log sigmoid(-d)), written -log sigmoid(d) + (1 - w) d
    (log sigmoid(d) - log sigmoid(-d) = d), which at w = 1 adds exact zeros. It is
    smallest where sigmoid(d) = w: a pair that is nearly a coin flip asks for a small
    margin instead of pushing, more weakly, toward an infinite one as a weighted
    Bradley-Terry loss would, and every pair still weighs the same in a step."""
    scores, texts = _scores(
        model, sequences, pad_id=pad_id, device=device, passes=passes, side=side, join=join
    )
    chosen, rejected = scores.chunk(2)
    diff = chosen - rejected
    if margins is not None:
        diff = diff - torch.tensor(margins, device=diff.device)
    losses = -torch.nn.functional.logsigmoid(diff)
    if weights is not None:
        doubt = 1 - torch.tensor(weights, device=diff.device, dtype=diff.dtype)
        losses = losses + doubt * diff
    if center_rewards:
        losses = losses + center_rewards * (chosen + rejected) ** 2
    return PairLoss(losses, diff, texts)
