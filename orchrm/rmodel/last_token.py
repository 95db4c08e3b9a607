"""The reward of a decoder sequence classifier, read at the last real token.

Hugging Face's decoder sequence classifiers (Llama, Qwen2/3, Mistral, Gemma and the other
subclasses of its `GenericForSequenceClassification`) score every position and read the
rightmost one whose token is not the pad token. When the pad token is the
end-of-sequence token (what `load_backbone` sets for a tokenizer without a pad token, and
what SmolLM2's tokenizer declares), a text that ends in it is read at the token before:
the reward cannot see that the text ended. `read_last_real_token` makes the model read
its reward at the last position the attention mask keeps, the same position whatever the
padding side and the pad id:

- a hook after the base model puts the last-layer state of that position at every
  position of the row, so whichever position the classifier reads, it reads that one;
- a hook before it counts positions from each row's first kept token when a row is
  padded on the left, so that a left-padded text is computed as a right-padded one.

Only hooks are added to that instance: the parameters, their names and the saved model
are those of the stock model. Plain transformers reads a saved model at the rightmost
token that is not the pad token: the same position unless the text ends in the pad token.
"""

from __future__ import annotations

import torch

_MARK = "_orchrm_reads_last_real_token"
"""The attribute that marks a base model whose classifier `read_last_real_token` set up."""


def _classifier(model):
    """The Hugging Face sequence classifier, under PEFT too."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _base_model(model):
    """The base model a decoder sequence classifier scores the last layer of, None for a
    model that is not a `GenericForSequenceClassification`."""
    from transformers.modeling_layers import GenericForSequenceClassification

    classifier = _classifier(model)
    if not isinstance(classifier, GenericForSequenceClassification):
        return None
    return getattr(classifier, classifier.base_model_prefix, None)


def last_kept(attention_mask: torch.Tensor) -> torch.Tensor:
    """The index of the last position each row of a (batch, width) attention mask keeps
    (0 for a row that keeps none)."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * (attention_mask != 0)).argmax(-1)


def _count_from_first_kept(module, args, kwargs):
    """Forward pre-hook: position ids counted from each row's first kept token, when a
    row of the batch is padded on the left and no position ids are given."""
    mask = kwargs.get("attention_mask")
    if mask is None or mask.dim() != 2 or kwargs.get("position_ids") is not None:
        return None
    if not bool(((mask[:, 0] == 0) & (mask != 0).any(-1)).any()):
        return None
    kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).clamp(min=0)
    return args, kwargs


def _spread_last_kept(module, args, kwargs, output):
    """Forward hook: the last-layer state at each row's last kept position, at every
    position of the row."""
    mask = kwargs.get("attention_mask")
    if mask is None or mask.dim() != 2:
        return None
    hidden = output.last_hidden_state
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    last = hidden[rows, last_kept(mask).to(hidden.device)]
    output.last_hidden_state = last[:, None, :].expand_as(hidden)
    return output


def read_last_real_token(model) -> bool:
    """Make `model` (a sequence classifier, under PEFT too) read its reward at the last
    position the attention mask keeps (module docstring); True when it does, False
    (model untouched) for a model that is not a `GenericForSequenceClassification`:
    encoders, which read the first position, and decoder classes that pool on their own.
    Calling it again changes nothing."""
    base = _base_model(model)
    if base is None:
        return False
    if not getattr(base, _MARK, False):
        base.register_forward_pre_hook(_count_from_first_kept, with_kwargs=True)
        base.register_forward_hook(_spread_last_kept, with_kwargs=True)
        setattr(base, _MARK, True)
    return True


def reads_last_real_token(model) -> bool:
    """Whether `read_last_real_token` set `model` up (under PEFT too)."""
    base = _base_model(model)
    return base is not None and getattr(base, _MARK, False)
