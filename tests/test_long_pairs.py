"""Pairs at the lengths of real orchestrations (`orchrm.experiments.train_speed.long`),
what the training-speed comparison at the paper's lengths trains on: lengths read from
the published MAS-Orchestra records, texts made to them with their own rendering first,
the same for the same seed, and the order TRL is given is orchrm's own."""

from __future__ import annotations

import pytest

from orchrm.experiments.train_speed.long import (
    filler,
    mas_lengths,
    mas_records,
    scaled,
    stretch,
)
from orchrm.rmodel.tokens import default_backbone, load_tokenizer
from tests.samples import DATA


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(default_backbone())


def test_lengths_come_from_the_records_and_scale_to_the_longest(tokenizer):
    if not DATA.is_dir():
        pytest.skip("the MAS-Orchestra records are not beside the checkout")
    lengths = mas_lengths(mas_records(DATA), tokenizer)
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


def test_a_plan_in_several_pairs_is_one_text_in_all_of_them(tokenizer):
    text = " ".join(f"step {i} checks the sum again." for i in range(400))
    plans = [f"plan {k}: cot agent" for k in range(3)]
    rows = [{"prompt": "add 2 and 2\n", "chosen": plans[0], "rejected": plans[1]},
            {"prompt": "add 2 and 2\n", "chosen": plans[0], "rejected": plans[2]},
            {"prompt": "add 2 and 2\n", "chosen": plans[1], "rejected": plans[2]}]  # fmt: skip
    a, b, c = stretch(rows, tokenizer, [20, 60, 150, 300], text, seed=0)
    assert a["chosen"] == b["chosen"] and a["rejected"] == c["chosen"]
    assert b["rejected"] == c["rejected"]
    assert len({a["chosen"], a["rejected"], b["rejected"]}) == 3


def test_a_text_longer_than_its_drawn_length_is_cut_to_it(tokenizer):
    row = {"prompt": "", "chosen": "word " * 200, "rejected": "other " * 200}
    (out,) = stretch([row], tokenizer, [30], "unused", seed=0)
    for side in ("chosen", "rejected"):
        assert len(tokenizer(out[side])["input_ids"]) == 30


def test_the_filler_is_the_records_reasoning():
    if not DATA.is_dir():
        pytest.skip("the MAS-Orchestra records are not beside the checkout")
    assert len(filler(mas_records(DATA))) > 50_000


@pytest.mark.parametrize("by_task", [False, True])
def test_trl_reads_the_pairs_in_the_order_orchrms_loop_reads_them(by_task, tmp_path, monkeypatch):
    """The order TRL is given is the micro-batches orchrm's own training loop ran, in
    random batches or batches filled task by task."""
    import orchrm.training.train as loop
    from orchrm.experiments.train_speed.compare import Run, orchrm_order
    from orchrm.jsonl import write_jsonl
    from orchrm.training.config import TrainConfig
    from tests.samples import tiny_decoder

    rows = [{"prompt": f"p{i} ", "chosen": "a " * (i % 7 + 1), "rejected": "b c",
             "task_id": f"t{i % 6}"} for i in range(40)]  # fmt: skip
    write_jsonl(rows, tmp_path / "pairs" / "train.jsonl")
    backbone = tiny_decoder(tmp_path / "backbone", [r["prompt"] + r["chosen"] for r in rows])
    run = Run(steps=5, batch=4, lr=1e-4, max_length=64, accumulation=2, task_batches=by_task)
    ran, step = [], loop._train_step

    def recording(state, batch):
        ran.extend(i for m in batch.micro_batches for i in sorted(m.pairs))
        return step(state, batch)

    monkeypatch.setattr(loop, "_train_step", recording)
    loop.train(TrainConfig(pairs=str(tmp_path / "pairs"), out=str(tmp_path / "rm"),
                           backbone=str(backbone), max_steps=run.steps, batch_size=run.batch,
                           grad_accumulation=run.accumulation, dtype="fp32", seed=0,
                           num_threads=1, task_batches=by_task), progress=False)  # fmt: skip
    order = orchrm_order(tmp_path / "pairs", run)
    assert len(ran) == len(order) == 40
    batches = [sorted(order[k : k + run.batch]) for k in range(0, len(order), run.batch)]
    assert [i for b in batches for i in b] == ran
    if by_task:  # six tasks of 6 or 7 pairs: each fills one batch of 4 alone
        alone = [b for b in batches if len({rows[i]["task_id"] for i in b}) == 1]
        assert len(alone) >= 6
