"""The last layer of a [CLS]-reading encoder reward model, computed at [CLS] only.

A BERT sequence classifier (the offline MiniLM) reads its reward from the first
position of the last layer: the pooler takes it, the head scores it. Every other
position of that layer feeds nothing. Its keys and values are still needed (the first
position attends to them); its query, attention output and feed-forward block are
not. `read_first_position_only` makes the last layer compute only what is read: the
same rewards and gradients up to float rounding, for about 10/12 of one layer's matrix
products less in the forward pass and as much again in the backward pass.

Only the layer's `forward` is replaced on that instance: the parameters, their names
and the saved model are those of the stock model.
"""

from __future__ import annotations

import functools
import types

import torch

# Attention kernels that take a (batch, 1, queries, keys) mask, so one query row of it
# can be cut out; flash_attention_2 takes a 2-D padding mask and is left alone.
_MASK_4D = ("sdpa", "eager")


def _encoder_layers(model) -> list | None:
    """The encoder layers of a BERT sequence classifier (under PEFT too), None for any
    other model."""
    from transformers import BertForSequenceClassification
    from transformers.models.bert.modeling_bert import BertLayer

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not isinstance(base, BertForSequenceClassification):
        return None
    config = base.config
    if config.is_decoder or config.add_cross_attention or config.chunk_size_feed_forward:
        return None
    if config._attn_implementation not in _MASK_4D:
        return None
    layers = list(base.bert.encoder.layer)
    return layers if layers and all(isinstance(x, BertLayer) for x in layers) else None


def _first_position(layer, hidden_states: torch.Tensor, attention_mask) -> torch.Tensor:
    """What BertLayer.forward computes, at the first position only: queries from it,
    keys and values from every position; hidden states of shape (batch, 1, hidden)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    attention = layer.attention.self
    batch, width = hidden_states.shape[:2]
    first = hidden_states[:, :1]

    def heads(x: torch.Tensor, length: int) -> torch.Tensor:
        return x.view(batch, length, -1, attention.attention_head_size).transpose(1, 2)

    query = heads(attention.query(first), 1)
    key = heads(attention.key(hidden_states), width)
    value = heads(attention.value(hidden_states), width)
    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[2] > 1:
        attention_mask = attention_mask[:, :, :1]
    kernel = ALL_ATTENTION_FUNCTIONS.get_interface(
        attention.config._attn_implementation, eager_attention_forward
    )
    output, _ = kernel(
        attention,
        query,
        key,
        value,
        attention_mask,
        dropout=attention.dropout.p if attention.training else 0.0,
        scaling=attention.scaling,
    )
    output = layer.attention.output(output.reshape(batch, 1, -1), first)
    return layer.feed_forward_chunk(output)


def _first_position_forward(layer, hidden_states, attention_mask=None, *args, **kwargs):
    """The layer's `forward`: `_first_position`, under gradient checkpointing when the
    model has it on (as the stock layer's class-level wrapper would)."""
    if layer.gradient_checkpointing and layer.training and torch.is_grad_enabled():
        compute = functools.partial(_first_position, layer)
        return layer._gradient_checkpointing_func(compute, hidden_states, attention_mask)
    return _first_position(layer, hidden_states, attention_mask)


def read_first_position_only(model) -> bool:
    """Compute the last encoder layer of `model` at the first position only (module
    docstring); True when done, False (model untouched) for a model it does not fit:
    anything but a BERT encoder sequence classifier with sdpa or eager attention."""
    layers = _encoder_layers(model)
    if layers is None:
        return False
    layers[-1].forward = types.MethodType(_first_position_forward, layers[-1])
    return True
