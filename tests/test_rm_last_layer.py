"""The last encoder layer computed at [CLS] only gives the stock model's rewards and
gradients, keeps its parameters, and leaves models it does not fit alone."""

from __future__ import annotations

import copy

import pytest
import torch

from orchrm.rmodel.backbone import collate
from orchrm.rmodel.last_layer import read_first_position_only
from orchrm.training.build import add_lora, disable_dropout


def tiny_bert(attn_implementation: str = "sdpa"):
    """A random 3-layer BERT sequence classifier (hidden 32) with a pooler, in train mode."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
        num_labels=1,
        attn_implementation=attn_implementation,
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    disable_dropout(model)
    return model.train()


# Unequal lengths: the batch is padded, so the attention mask is applied.
SEQUENCES = [[1, 5, 7, 9, 2], [1, 8, 2], [1, *range(10, 40), 2], [1, 3, 3, 3, 2]]


def rewards_and_grads(model) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    scores = model(**collate(SEQUENCES, pad_id=0)).logits.squeeze(-1)
    (scores * torch.tensor([1.0, -2.0, 0.5, 3.0])).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return scores.detach(), grads


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_same_rewards_and_gradients_as_the_stock_model(attn):
    stock = tiny_bert(attn)
    trimmed = copy.deepcopy(stock)
    assert read_first_position_only(trimmed)
    want, want_grads = rewards_and_grads(stock)
    got, got_grads = rewards_and_grads(trimmed)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)
    # The last layer's feed-forward block ran on one position per text only.
    seen = []
    last = trimmed.bert.encoder.layer[-1].intermediate
    last.register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape))
    trimmed(**collate(SEQUENCES, pad_id=0))
    assert seen == [torch.Size([len(SEQUENCES), 1, 32])]


def test_parameters_and_saved_weights_are_the_stock_models(tmp_path):
    stock = tiny_bert()
    trimmed = copy.deepcopy(stock)
    read_first_position_only(trimmed)
    assert trimmed.state_dict().keys() == stock.state_dict().keys()
    trimmed.save_pretrained(tmp_path)
    from transformers import AutoModelForSequenceClassification

    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).train()
    disable_dropout(loaded)
    torch.testing.assert_close(rewards_and_grads(loaded)[0], rewards_and_grads(stock)[0])


def test_under_lora_the_adapters_get_the_same_gradients():
    stock = add_lora(tiny_bert(), r=4, alpha=8, dropout=0.0)
    trimmed = copy.deepcopy(stock)
    assert read_first_position_only(trimmed)
    want, want_grads = rewards_and_grads(stock)
    got, got_grads = rewards_and_grads(trimmed)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert any("lora" in n for n in want_grads)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_a_decoder_is_left_alone():
    from transformers import LlamaConfig, LlamaForSequenceClassification

    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=1,
        pad_token_id=0,
    )
    model = LlamaForSequenceClassification(config)
    assert not read_first_position_only(model)
    assert all("forward" not in vars(layer) for layer in model.model.layers)


def test_under_gradient_checkpointing_the_last_layer_is_recomputed_too():
    from orchrm.training.build import enable_gradient_checkpointing

    stock = tiny_bert()
    trimmed = copy.deepcopy(stock)
    for model in (stock, trimmed):
        enable_gradient_checkpointing(model, lora=False)
    read_first_position_only(trimmed)
    calls = []
    last = trimmed.bert.encoder.layer[-1].intermediate
    last.register_forward_hook(lambda _m, args, _out: calls.append(args[0].shape[1]))
    want, want_grads = rewards_and_grads(stock)
    got, got_grads = rewards_and_grads(trimmed)
    assert calls == [1, 1]  # forward, then again in the backward pass
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)
