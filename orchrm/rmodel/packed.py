"""Padding-free rewards for decoder sequence classifiers: the texts of a batch packed into
one row.

A padded batch computes every text at the width of its longest: on real orchestrations,
whose lengths in one batch differ several times over, most of the work is padding. A
packed batch is one row holding every text end to end (`pack`):

- each text's positions count from 0 (`position_ids`), so rotary embeddings see what
  they see in a padded row;
- attention never crosses texts: the attention function `orchrm_packed` (registered with
  transformers' `AttentionInterface`) runs PyTorch's scaled-dot-product attention once per
  text, causal, on that text's slice of queries, keys and values (`cu_seq_lens_q`, the
  texts' cumulative lengths, passed down to every layer as flash-attention's
  variable-length kernels take them); without those lengths it is transformers' `sdpa`,
  so a padded batch computes as before. On CUDA with `flash_attention_2`, transformers'
  own variable-length path reads the same arguments;
- each text's reward is read at its own last token: a hook after the base model gathers
  the last-layer state at each text's end, and a hook after the classifier scores those
  states, one reward per text (`packed_rewards`).

The model is called through its own `forward` (and so through PEFT, DDP or FSDP wrappers
around it); the hooks act only inside `packed_forward`, a per-thread context, so the same
model scores padded batches in other threads unchanged. Gradient checkpointing recomputes
each layer with the same arguments, texts' lengths included. Decoders whose layers
attend through a sliding window, and models whose attention is not `sdpa` or
`flash_attention_2` (eager), are not packed (`enable_packing` says False). A saved
model's config does not record the attention implementation: it loads anywhere.
"""

from __future__ import annotations

import contextlib
import itertools
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from orchrm.rmodel.last_token import _base_model, _classifier, reads_last_real_token

PACKED = "orchrm_packed"
"""The attention implementation of a model that `enable_packing` set up on the CPU."""
VARLEN = ("flash_attention_2", "flash_attention_3")
"""Implementations whose own variable-length kernels read packed rows (CUDA)."""
_MARK = "_orchrm_packs"


@dataclass
class _Pack:
    """The texts of the packed row being computed in this thread."""

    ends: torch.Tensor
    """The index just past each text in the row."""
    states: torch.Tensor | None = None
    """The last-layer state at each text's last token, set by the base model's hook."""


_PACK: ContextVar[_Pack | None] = ContextVar("orchrm_pack", default=None)


def _packed_attention(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kw
):
    """`sdpa` per text of a packed row (`cu_seq_lens_q` given), else `sdpa` as it is."""
    bounds = kw.get("cu_seq_lens_q")
    if bounds is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kw
        )
    edges = bounds.tolist()
    parts = []
    for start, end in itertools.pairwise(edges):
        out, _ = sdpa_attention_forward(
            module,
            query[:, :, start:end],
            key[:, :, start:end],
            value[:, :, start:end],
            None,
            dropout,
            scaling,
            True,
        )
        parts.append(out)
    return torch.cat(parts, dim=1), None


def _packed_mask(*args, **kwargs):
    """No mask for a packed row (its attention keeps to each text); `sdpa`'s otherwise."""
    if _PACK.get() is not None:
        return None
    return sdpa_mask(*args, **kwargs)


AttentionInterface.register(PACKED, _packed_attention)
AttentionMaskInterface.register(PACKED, _packed_mask)


def _gather_ends(module, args, kwargs, output):
    """Base model hook: inside `packed_forward`, the state at each text's last token."""
    pack = _PACK.get()
    if pack is not None:
        pack.states = output.last_hidden_state[0, pack.ends - 1]
    return None


def _score_ends(module, args, kwargs, output):
    """Classifier hook: inside `packed_forward`, one reward per text, from its last
    token's state (`_gather_ends`), instead of the row's one."""
    pack = _PACK.get()
    if pack is not None and pack.states is not None:
        output.logits = module.score(pack.states)
    return output


def _sliding(config) -> bool:
    """Whether any layer attends through a sliding window."""
    kinds = getattr(config, "layer_types", None) or ()
    return "sliding_attention" in kinds or bool(getattr(config, "use_sliding_window", False))


def enable_packing(model) -> bool:
    """Set a decoder sequence classifier that reads its reward at the last real token
    (`orchrm.rmodel.last_token`), under PEFT too, up to compute packed rows; True when it
    does (an `sdpa` model's attention becomes `orchrm_packed`, a flash-attention one keeps
    its own), False (model untouched) for any other model. Calling it again changes
    nothing."""
    base = _base_model(model)
    if base is None or not reads_last_real_token(model) or _sliding(base.config):
        return False
    classifier = _classifier(model)
    if getattr(classifier, _MARK, False):
        return True
    implementation = classifier.config._attn_implementation
    if implementation == "sdpa":
        classifier.set_attn_implementation(PACKED)
    elif implementation not in VARLEN:
        return False
    base.register_forward_hook(_gather_ends, with_kwargs=True)
    classifier.register_forward_hook(_score_ends, with_kwargs=True)
    setattr(classifier, _MARK, True)
    return True


def packs(model) -> bool:
    """Whether `enable_packing` set `model` up (under PEFT, DDP or FSDP wrappers too)."""
    while hasattr(model, "module") and not hasattr(model, "get_base_model"):
        model = model.module  # DDP / FSDP
    return getattr(_classifier(model), _MARK, False)


def pack(sequences: list[list[int]], device) -> dict[str, torch.Tensor]:
    """One row of every sequence end to end: input ids, per-text positions from 0, and the
    cumulative lengths and longest length that variable-length attention reads."""
    lengths = [len(s) for s in sequences]
    if not lengths or min(lengths) < 1:
        raise ValueError("a packed row needs one or more texts of at least one token")
    ids = torch.tensor([t for s in sequences for t in s], dtype=torch.long, device=device)
    positions = torch.cat([torch.arange(n, device=device) for n in lengths])
    bounds = torch.tensor([0, *lengths], device=device).cumsum(0).to(torch.int32)
    longest = max(lengths)
    return {
        "input_ids": ids[None],
        "position_ids": positions[None],
        "cu_seq_lens_q": bounds,
        "cu_seq_lens_k": bounds,
        "max_length_q": longest,
        "max_length_k": longest,
    }


@contextlib.contextmanager
def packed_forward(ends: torch.Tensor):
    """The packed row with texts ending at `ends` is computed in this thread."""
    token = _PACK.set(_Pack(ends))
    try:
        yield
    finally:
        _PACK.reset(token)


def packed_logits(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The reward of each text of a packed row (`pack`), in order, through `model`'s own
    forward (set up by `enable_packing`): float, with its autograd graph."""
    with packed_forward(inputs["cu_seq_lens_q"][1:].long()):
        logits = model(**inputs, use_cache=False).logits
    return logits.squeeze(-1).float()


def packed_rewards(model, sequences: list[list[int]], device) -> torch.Tensor:
    """The reward of each sequence, in order, from one packed row (`packed_logits`)."""
    return packed_logits(model, pack(sequences, device))
