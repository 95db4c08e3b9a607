"""Pairs at the lengths of real orchestrations (`orchrm.experiments.train_speed.long`),
what the training-speed comparison at the paper's lengths trains on: lengths read from
the published MAS-Orchestra records, texts made to them with their own rendering first,
the same for the same seed, and the order TRL is given is orchrm's own."""

from __future__ import annotations

import pytest

from orchrm.experiments.train_speed.long import filler, mas_lengths, scaled, stretch
from orchrm.rmodel.backbone import default_backbone, load_tokenizer
from tests.samples import DATA


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(default_backbone())


def test_lengths_come_from_the_records_and_scale_to_the_longest(tokenizer):
    if not DATA.is_dir():
        pytest.skip("the MAS-Orchestra records are not beside the checkout")
    lengths = mas_lengths(DATA, tokenizer)
    assert len(lengths) > 40 and lengths == sorted(lengths)
    assert max(lengths) > 2 * min(lengths)  # real plans differ in length several times
    wide = scaled(lengths, 2048)
    assert max(wide) == 2048 and min(wide) >= 2
    assert wide[len(wide) // 2] == round(lengths[len(lengths) // 2] * 2048 / max(lengths))


def test_each_text_is_made_to_a_drawn_length_its_own_rendering_first(tokenizer):
    text = " ".join(f"step {i} checks the sum again." for i in range(400))
    rows = [{"prompt": f"question {i}: add {i} and 2\n", "chosen": "plan: cot agent",
             "rejected": "plan: debate agents", "task_id": f"t{i}"} for i in range(12)]  # fmt: skip
    lengths = [20, 60, 150, 300]
    made = stretch(rows, tokenizer, lengths, text, seed=0)
    assert made == stretch(rows, tokenizer, lengths, text, seed=0)
    assert made != stretch(rows, tokenizer, lengths, text, seed=1)
    sizes = []
    for row, out in zip(rows, made, strict=True):
        assert out["prompt"] == "" and out["task_id"] == row["task_id"]
        for side in ("chosen", "rejected"):
            assert out[side].startswith(row["prompt"] + row[side])
            sizes.append(len(tokenizer(out[side])["input_ids"]))
    # each within a few tokens of a drawn length (the joint tokenizes as it will)
    assert all(min(abs(n - k) for k in lengths) <= 6 for n in sizes), sizes
    assert len({min(lengths, key=lambda k: abs(n - k)) for n in sizes}) > 1


def test_a_text_longer_than_its_drawn_length_is_cut_to_it(tokenizer):
    row = {"prompt": "", "chosen": "word " * 200, "rejected": "other " * 200}
    (out,) = stretch([row], tokenizer, [30], "unused", seed=0)
    for side in ("chosen", "rejected"):
        assert len(tokenizer(out[side])["input_ids"]) == 30


def test_the_filler_is_the_records_reasoning():
    if not DATA.is_dir():
        pytest.skip("the MAS-Orchestra records are not beside the checkout")
    assert len(filler(DATA)) > 50_000


def test_trl_reads_the_pairs_in_orchrms_order(tmp_path):
    from orchrm.experiments.train_speed.compare import Run, orchrm_order
    from orchrm.jsonl import write_jsonl
    from orchrm.training.batching import epoch_steps

    rows = [{"prompt": "p", "chosen": "a " * (i % 7 + 1), "rejected": "b"} for i in range(40)]
    write_jsonl(rows, tmp_path / "train.jsonl")
    run = Run(steps=5, batch=4, lr=1e-4, max_length=64, accumulation=2)
    order = orchrm_order(tmp_path, run)
    widths = [i % 7 + 1 for i in range(40)]  # the real widths draw the same batches
    steps = epoch_steps(widths, batch_size=4, grad_accumulation=2, max_tokens=None, seed=0,
                        epoch=0)  # fmt: skip
    batches = [set(m.pairs) for s in steps for m in s.micro_batches]
    assert [set(order[k : k + 4]) for k in range(0, len(order), 4)] == batches
    assert sorted(order) == list(range(40))
