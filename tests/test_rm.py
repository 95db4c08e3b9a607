"""Training a Bradley-Terry reward model, saving, loading, resuming, scoring."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification

from orchrm.jsonl import write_jsonl
from orchrm.orchestration import render_for_rm
from orchrm.parse import parse_harmony
from orchrm.rmodel.files import ModelError
from orchrm.rmodel.tokens import token_counter
from orchrm.scoring.files import score_files
from orchrm.scoring.local import OrchRM
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, export, mine
from orchrm.training.batching import length_grouped_batches
from orchrm.training.config import TrainConfig
from orchrm.training.train import train
from orchrm.world.generate import generate
from tests.conftest import run_orchrm
from tests.samples import HIGH_DOM, LOW_DOM, tiny_decoder, tiny_training, train_and_save

FAST = {"max_length": 64, "batch_size": 8, "lr": 1e-4, "eval_every": 4, "num_threads": 2}


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory) -> Path:
    """World `math` pairs exported as train/validation/test JSONL."""
    folder = tmp_path_factory.mktemp("pairs")
    log = folder / "math.jsonl"
    write_jsonl(generate("math", 40, 4, seed=3, progress=False).records, log)
    with Store(folder / "s.duckdb") as store:
        ingest_file(store, log)
        mine(
            store,
            MineConfig(
                specialized=("specialized",), base=("base",), cap_per_task=4, split=(0.7, 0.3, 0.0)
            ),
        )
        export(store, folder / "export")
    return folder / "export"


@pytest.fixture(scope="module")
def trained(pairs_dir, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("rm")
    summary = train(
        TrainConfig(pairs=str(pairs_dir), out=str(out), max_steps=8, **FAST), progress=False
    )
    return out, summary


def test_training_learns_and_saves_a_standard_checkpoint(trained):
    out, summary = trained
    # 8 batches of 8 pairs; an epoch's one short batch may fall among them.
    assert summary.steps == 8 and 56 < summary.pairs_seen <= 64
    history = summary.history
    assert [h["step"] for h in history] == [4, 8]
    assert set(history[-1]["accuracy_by_kind"]) <= {"coi", "sob"}
    meta = json.loads((out / "model" / "orchrm.json").read_text())
    assert meta["render_version"] == "orchrm-rm-text/4" and meta["max_length"] == 64
    assert meta["pair_data_hash"] and "reward_std" in meta and meta["training"]["steps"] == 8
    # A plain Hugging Face load works (no orchrm code, no pickle, no remote code).
    model = AutoModelForSequenceClassification.from_pretrained(out / "model")
    assert model.config.num_labels == 1
    assert (
        not list((out / "model").glob("*.bin")) and (out / "model" / "model.safetensors").exists()
    )


def test_training_moves_the_weights(trained):
    out, _ = trained
    from orchrm.rmodel.tokens import default_backbone

    before = load_file(Path(default_backbone()) / "model.safetensors")
    after = load_file(out / "model" / "model.safetensors")
    key = next(k for k in after if k.endswith("encoder.layer.0.attention.self.query.weight"))
    original = next(v for k, v in before.items() if k.endswith(key.split("bert.")[-1]))
    assert not torch.equal(original, after[key])


def test_a_second_training_in_one_process_may_use_another_precision(pairs_dir, tmp_path):
    """accelerate keeps one precision per process; a notebook or the demo trains several
    models, and on a CPU with AMX the default (bf16) differs from an explicit fp32."""
    for bf16 in (False, True, False):
        summary = train(
            TrainConfig(
                pairs=str(pairs_dir), out=str(tmp_path / str(bf16)), max_steps=1, bf16=bf16, **FAST
            ),
            progress=False,
        )
        assert summary.bf16 is bf16 and summary.steps == 1


def scores(rm: OrchRM, items) -> list[float | None]:
    """The scores of `rm.score(items)`, in input order."""
    return [r.score for r in rm.score(items)]


def test_scores_come_back_in_input_order_and_match_one_by_one(trained):
    out, _ = trained
    # fp32: batching must not change a score beyond float noise. (In bf16 a batch's
    # padding moves the last bits; checked below with bf16's tolerance, on every CPU.)
    rm = OrchRM.load(out / "model", batch_size=3, dtype="fp32")
    plans = [parse_harmony(HIGH_DOM), parse_harmony(LOW_DOM), HIGH_DOM, "not a plan"]
    questions = ["What is 2+3?", "Find the remainder when 7^100 is divided by 13." * 5]
    items = [(q, p) for q in questions for p in plans]
    batch = scores(rm, items)
    assert batch[3] is None and batch[7] is None  # unparseable text: no score
    alone = [scores(rm, [item])[0] for item in items]
    assert batch == pytest.approx(alone, abs=1e-4)
    # bf16 keeps 8 bits of mantissa: scores move by ~1e-3 (measured up to 2.3e-3 on the
    # demo's math model, whose scores spread with sd 0.14), never by more than 5e-3.
    half = OrchRM.load(out / "model", batch_size=3, dtype="bf16")
    assert (half.dtype, rm.dtype) == ("bf16", "fp32")
    in_bf16 = scores(half, items)
    assert in_bf16[3] is None and in_bf16[7] is None
    assert in_bf16 == pytest.approx(batch, abs=5e-3)
    assert in_bf16 == pytest.approx([scores(half, [i])[0] for i in items], abs=5e-3)
    assert batch[0] == pytest.approx(batch[2], abs=1e-6)  # parsed or raw: same text
    text = rm.render(questions[1], plans[0])
    count = token_counter(rm.tokenizer)
    assert text == render_for_rm(questions[1], plans[0], rm.max_length - 2, count)
    # The question is cut by the model's own tokenizer to half the budget.
    question_line = text.split("\n")[0]
    assert question_line.endswith("...") and count(question_line) <= (rm.max_length - 2) // 2


def test_a_model_trained_on_another_rendering_is_refused(trained, tmp_path):
    out, _ = trained
    copy = tmp_path / "old"
    copy.mkdir()
    for f in (out / "model").iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    meta = json.loads((copy / "orchrm.json").read_text())
    (copy / "orchrm.json").write_text(json.dumps({**meta, "render_version": "orchrm-rm-text/1"}))
    with pytest.raises(ModelError, match="retrain"):
        OrchRM.load(copy)
    # Overriding the check loads the same weights: scored as the checked model scores.
    forced = OrchRM.load(copy, check_version=False, dtype="fp32").score([("q", HIGH_DOM)])[0]
    assert forced.reason == forced.message == "" and math.isfinite(forced.score)
    assert forced.tokens > 0
    assert forced == OrchRM.load(out / "model", dtype="fp32").score([("q", HIGH_DOM)])[0]


def test_resume_after_a_kill_matches_an_uninterrupted_run(pairs_dir, tmp_path):
    whole = train(
        TrainConfig(
            pairs=str(pairs_dir), out=str(tmp_path / "a"), max_steps=4, save_every=2, **FAST
        ),
        progress=False,
    )
    flags = [
        "--pairs",
        str(pairs_dir),
        "--out",
        str(tmp_path / "b"),
        "--max-steps",
        "4",
        "--save-every",
        "2",
        "--max-length",
        "64",
        "--batch-size",
        "8",
        "--lr",
        "1e-4",
        "--eval-every",
        "4",
        "--num-threads",
        "2",
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "orchrm", "train", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    checkpoint = tmp_path / "b" / "checkpoints" / "step-2"
    deadline = time.time() + 240
    while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # mid-run, as a crash or a pre-emption would
    process.wait()
    assert checkpoint.exists() and not (tmp_path / "b" / "checkpoints" / "step-4").exists()
    resumed = train(
        TrainConfig(
            pairs=str(pairs_dir), out=str(tmp_path / "b"), max_steps=4, save_every=2, **FAST
        ),
        resume=True,
        progress=False,
    )
    assert resumed.steps == 4 and resumed.pairs_seen == whole.pairs_seen
    a = load_file(tmp_path / "a" / "checkpoints" / "step-4" / "model.safetensors")
    b = load_file(tmp_path / "b" / "checkpoints" / "step-4" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)  # no batch repeated or lost
    assert resumed.best_validation_accuracy == pytest.approx(
        whole.best_validation_accuracy, abs=0.01
    )


def test_batches_are_random_draws_unless_sorted_and_reproducible():
    lengths = [(i * 37) % 200 + 10 for i in range(400)]

    def spread(batches):
        return sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches)

    for group in (1, 64):
        batches = length_grouped_batches(lengths, 8, seed=1, epoch=0, group=group)
        assert sorted(i for b in batches for i in b) == list(range(400))
        assert batches == length_grouped_batches(lengths, 8, seed=1, epoch=0, group=group)
        assert batches != length_grouped_batches(lengths, 8, seed=1, epoch=1, group=group)
    # What a step holds is drawn at random whatever the lengths (~150 tokens apart in a
    # batch); sorting 64 batches together puts neighbours in length together.
    assert spread(length_grouped_batches(lengths, 8, seed=1, epoch=0)) / 50 > 100
    assert spread(length_grouped_batches(lengths, 8, seed=1, epoch=0, group=64)) / 50 < 10


def test_accelerate_launch_trains_with_two_cpu_processes(pairs_dir, tmp_path, launch_port):
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--main_process_port",
        launch_port,
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "orchrm",
        "train",
        "--json",
        "--pairs",
        str(pairs_dir),
        "--out",
        str(tmp_path),
        "--max-steps",
        "4",
        "--max-length",
        "64",
        "--batch-size",
        "4",
        "--eval-every",
        "4",
        "--num-threads",
        "1",
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    assert summary["processes"] == 2 and summary["steps"] == 4
    # Each step: a batch of up to 4 pairs on each of 2 processes (one batch per epoch may
    # be short: it ends a length-sorted chunk).
    assert 4 * 3 * 2 < summary["pairs_seen"] <= 4 * 4 * 2
    assert (tmp_path / "model" / "model.safetensors").exists()


def test_decoder_backbone_with_lora_trains_and_reads_the_last_real_token(pairs_dir, tmp_path):
    records = [json.loads(x) for x in (pairs_dir / "train.jsonl").read_text().splitlines()]
    texts = [r["prompt"] + r[side] for r in records for side in ("chosen", "rejected")]
    backbone = tiny_decoder(tmp_path / "llama", texts)
    before = load_file(backbone / "model.safetensors")["score.weight"].clone()
    summary = train(
        TrainConfig(
            pairs=str(pairs_dir),
            out=str(tmp_path / "rm"),
            backbone=str(backbone),
            lora=True,
            lora_r=4,
            lora_alpha=8,
            max_steps=3,
            **{**FAST, "lr": 1e-2},
        ),
        progress=False,
    )
    assert summary.steps == 3
    saved = tmp_path / "rm" / "model"
    weights = load_file(saved / "model.safetensors")
    assert not any("lora" in k for k in weights)  # adapters merged: a standard checkpoint
    assert not torch.equal(before, weights["score.weight"])  # the score head was trained
    rm = OrchRM.load(saved, dtype="fp32")  # padded and alone agree to fp32's noise
    assert rm.tokenizer.pad_token == "</s>"  # borrowed from end-of-sequence: no pad token
    assert rm.model.config.pad_token_id == rm.tokenizer.pad_token_id == 1  # "</s>"'s id
    short, long = texts[0][:200], texts[1]
    alone = rm.score_texts([short])[0].score
    padded = rm.score_texts([short, long])[0].score  # `short` is right-padded in this batch
    assert alone == pytest.approx(padded, abs=1e-4)


def test_train_and_score_commands(pairs_dir, tmp_path):
    done = run_orchrm(
        "train", "--pairs", str(pairs_dir), "--out", str(tmp_path), "--max-steps", "2",
        "--max-length", "64", "--batch-size", "4", "--eval-every", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 2 steps" in done.stdout
    log = tmp_path / "log.jsonl"
    records = generate("math", 2, 2, seed=9, progress=False).records
    write_jsonl([*records, {"question": "q", "full_response": "no plan"}], log)
    # the installed command in its own process, as users run it: the libraries it loads a
    # model with print nothing of their own (no load report, no warning)
    scored = run_orchrm(
        "score", str(log), "--rm", str(tmp_path / "model"), "--dtype", "fp32", process=True
    )
    assert scored.returncode == 0, scored.stderr[-2000:]
    rows = [json.loads(x) for x in scored.stdout.splitlines()]
    assert len(rows) == len(records) + 1
    assert all(rec["orchestration"] for rec in records)  # every generated record has a plan
    assert all("reason" not in r and math.isfinite(r["score"]) for r in rows[:-1])
    # The command scores as the Python API does.
    here = score_files(OrchRM.load(tmp_path / "model", dtype="fp32"), [log]).rows
    assert [r["score"] for r in rows] == pytest.approx([r["score"] for r in here], abs=1e-5)
    assert rows[-1]["score"] is None and rows[-1]["reason"] == "no_orchestration"
    said = scored.stderr.splitlines()  # orchrm's summary and its one problem, nothing else
    assert len(said) == 3 and said[0].startswith(f"{len(records)} of {len(rows)} records scored")
    assert said[2].endswith("no <agent> or <answer> block found")


def test_evaluating_the_saved_model_reproduces_its_validation_accuracy(trained, pairs_dir):
    from orchrm.training.train import evaluate_file

    out, summary = trained
    metrics = evaluate_file(out / "model", pairs_dir / "validation.jsonl")
    assert metrics["accuracy"] == pytest.approx(summary.best_validation_accuracy, abs=1e-9)
    assert set(metrics["accuracy_by_domain"]) == {"math"}


def test_validation_scores_each_distinct_text_once(trained, pairs_dir, monkeypatch):
    """A plan sits in several pairs of its task; it is scored once, and every pair
    still gets its score (the accuracy matches pair-by-pair scoring)."""
    import orchrm.training.evaluate as rm_evaluate
    from orchrm.training.data import read_pair_file, tokenize

    out, _ = trained
    rm = OrchRM.load(out / "model")
    pairs = tokenize(read_pair_file(pairs_dir / "validation.jsonl"), rm.tokenizer, rm.max_length)
    texts = [tuple(ids) for ids in pairs.chosen + pairs.rejected]
    assert len(set(texts)) < len(texts)  # the fixture's pairs do share plans
    scored = []
    real = rm_evaluate.rewards
    monkeypatch.setattr(
        rm_evaluate,
        "rewards",
        lambda model, seqs, *a: scored.append(len(seqs)) or real(model, seqs, *a),
    )
    metrics = rm_evaluate.pairwise_accuracy(
        rm.model, pairs, rm.tokenizer.pad_token_id, 8, rm.device, False
    )
    assert scored == [len(set(texts))]
    pad = rm.tokenizer.pad_token_id

    def alone(ids):
        return real(rm.model, [ids], pad, 1, rm.device, False)[0]

    one_by_one = [alone(c) > alone(r) for c, r in zip(pairs.chosen, pairs.rejected, strict=True)]
    assert metrics["accuracy"] == pytest.approx(sum(one_by_one) / len(one_by_one))


def test_the_score_head_can_get_its_own_learning_rate():
    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.build import param_groups

    model, _ = load_backbone(default_backbone())
    body, head = param_groups(model, TrainConfig(lr=5e-5, head_lr=1e-3))
    assert [tuple(p.shape) for p in head["params"]] == [(1, 384), (1,)]  # classifier only
    assert head["lr"] == 1e-3 and "lr" not in body  # the body takes the optimizer's lr
    everything = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for g in (body, head) for p in g["params"]) == everything
    [single] = param_groups(model, TrainConfig(lr=5e-5))
    assert len(single["params"]) == len(body["params"]) + 2


def _rewrite_state(folder: Path, **changes) -> None:
    state = json.loads((folder / "state.json").read_text())
    (folder / "state.json").write_text(json.dumps({**state, **changes}))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _code_pickle(path: Path) -> None:
    from fractions import Fraction

    torch.save({"state": {}, "param_groups": [], "x": Fraction(1, 3)}, path)


def _other_model(folder: Path) -> None:
    from safetensors.torch import save_file

    save_file({"weight": torch.zeros(1, 5), "bias": torch.zeros(1)}, folder / "model.safetensors")


DAMAGE = {
    "weights cut in half": (lambda f: _truncate(f / "model.safetensors"), "model.safetensors:"),
    "weights random bytes": (
        lambda f: (f / "model.safetensors").write_bytes(os.urandom(500)),
        "model.safetensors:",
    ),
    "weights missing": (lambda f: (f / "model.safetensors").unlink(), "model.safetensors missing"),
    "weights of another model": (_other_model, "does not match the model: other shape weight"),
    "state missing": (lambda f: (f / "state.json").unlink(), "state.json missing"),
    "state not JSON": (lambda f: (f / "state.json").write_text("{step: 4"), "state.json:"),
    "state nested too deep": (
        lambda f: (f / "state.json").write_text("[" * 200_000),
        "state.json:",
    ),
    "negative step": (lambda f: _rewrite_state(f, step=-4), "step is -4, not a whole number"),
    "fractional step": (lambda f: _rewrite_state(f, step=4.5), "step is 4.5, not a whole number"),
    "step as text": (lambda f: _rewrite_state(f, step="4"), "step is '4', not a whole number"),
    "step of another folder": (lambda f: _rewrite_state(f, step=3), "says step 3, the folder"),
    "unknown state field": (lambda f: _rewrite_state(f, lr=1), "fields differ .*lr"),
    "optimizer cut in half": (lambda f: _truncate(f / "optimizer.pt"), "optimizer.pt:"),
    "optimizer pickles code": (lambda f: _code_pickle(f / "optimizer.pt"), "optimizer.pt:"),
    "scheduler garbage": (
        lambda f: (f / "scheduler.json").write_text("[1, 2]"),
        "not a scheduler state",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_latest_checkpoint_is_named_and_resume_takes_the_one_before(tmp_path, case):
    from orchrm.training.checkpoint import apply_checkpoint, newest_intact

    damage, reason = DAMAGE[case]
    saved = train_and_save(tmp_path, [2, 4])
    damage(tmp_path / "checkpoints" / "step-4")
    model, optimizer, scheduler = tiny_training()
    notes = []
    found = newest_intact(tmp_path, model, optimizer, say=notes.append)
    assert found is not None and found.path.name == "step-2"
    named = f"checkpoint {tmp_path / 'checkpoints' / 'step-4'} is unusable: "
    assert notes[0].startswith(named) and re.search(reason, notes[0])
    assert notes[-1] == "resuming from step-2 instead of step-4"
    assert torch.equal(model.weight, tiny_training()[0].weight)  # nothing applied yet
    state = apply_checkpoint(found, model, optimizer, scheduler)
    assert state.step == 2 and torch.equal(model.weight, saved[2])
    assert scheduler.last_epoch == 1


def test_folders_that_are_not_checkpoints_never_break_a_resume(tmp_path):
    from orchrm.training.checkpoint import newest_intact

    train_and_save(tmp_path, [2, 4])
    folder = tmp_path / "checkpoints"
    for stray in ("step-foo", "checkpoint-foo", "step-", "step-007", "step-5-old"):
        (folder / stray).mkdir()
    (folder / "step-9").write_text("a file, not a folder")
    (folder / "step-12").mkdir()  # no state file: a copy that never finished
    (folder / "step-99999999999999999999").mkdir()
    notes = []
    found = newest_intact(tmp_path, *tiny_training()[:2], say=notes.append)
    assert found.path.name == "step-4" and found.state.step == 4
    ignored = {n.split(": ")[0] for n in notes if n.startswith("ignoring")}
    names = ("step-foo", "checkpoint-foo", "step-", "step-007", "step-5-old", "step-9")
    assert ignored >= {f"ignoring {folder / n}" for n in names}
    assert any(f"{folder / 'step-12'} is unusable: " in n and "state.json" in n for n in notes)
    assert notes[-1] == "resuming from step-4 instead of step-12"


def test_nothing_intact_means_a_fresh_start_said_once(tmp_path):
    from orchrm.training.checkpoint import newest_intact

    train_and_save(tmp_path, [2])
    _rewrite_state(tmp_path / "checkpoints" / "step-2", step=-1)
    notes = []
    assert newest_intact(tmp_path, *tiny_training()[:2], say=notes.append) is None
    assert notes[-1].startswith("no intact checkpoint in") and "step 0" in notes[-1]


def test_a_save_killed_midway_leaves_a_folder_the_next_start_removes(tmp_path):
    script = f"""
import os, signal, sys, torch
sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from tests.samples import train_and_save
train_and_save({str(tmp_path)!r}, [2])
real = torch.save
def die(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # after the weights and optimizer are written
torch.save = die
train_and_save({str(tmp_path)!r}, [2, 4])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    from orchrm.training.checkpoint import checkpoint_folders, remove_unfinished

    folder = tmp_path / "checkpoints"
    [left] = [p for p in folder.iterdir() if p.name.startswith(".")]
    assert (left / "model.safetensors").exists() and not (left / "state.json").exists()
    assert [p.name for p in checkpoint_folders(tmp_path)] == ["step-2"]  # step-4 never landed
    notes = []
    assert remove_unfinished(tmp_path, notes.append) == [left] and not left.exists()
    assert notes == [f"removed 1 unfinished checkpoint folder(s) in {folder}: {left.name}"]
    assert remove_unfinished(tmp_path, notes.append) == [] and len(notes) == 1


def test_saves_replace_in_place_and_prune_only_checkpoints_up_to_the_step(tmp_path):
    from orchrm.training.checkpoint import FILES

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "notes").mkdir()
    (folder / "step-50").mkdir()  # from a longer run that went on before being cut short
    train_and_save(tmp_path, [2, 4, 6, 6], keep=2)
    assert sorted(p.name for p in folder.iterdir()) == ["notes", "step-4", "step-50", "step-6"]
    assert sorted(p.name for p in (folder / "step-6").iterdir()) == sorted(FILES)


@pytest.mark.slow  # make test-slow: a heavy case of what the suite checks
def test_resume_passes_over_a_damaged_checkpoint_and_continues_exactly(pairs_dir, tmp_path, capsys):
    """A run whose last checkpoint is damaged, with debris beside it, resumes from the
    checkpoint before and ends with the weights of a run that was never interrupted."""
    import shutil

    settings = {"pairs": str(pairs_dir), "max_steps": 8, "save_every": 2, **FAST}
    whole = train(TrainConfig(out=str(tmp_path / "a"), **settings), progress=False)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    folder = tmp_path / "b" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["step-6", "step-8"]
    weights = folder / "step-8" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (folder / "step-foo").mkdir()
    (folder / "step-12").mkdir()
    killed = folder / ".step-k1ll3d"
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(bytes(4096))
    capsys.readouterr()
    resumed = train(TrainConfig(out=str(tmp_path / "b"), **settings), resume=True, progress=False)
    notes = capsys.readouterr().err
    assert not killed.exists() and "removed 1 unfinished checkpoint folder(s)" in notes
    assert f"checkpoint {folder / 'step-8'} is unusable: model.safetensors: " in notes
    assert f"ignoring {folder / 'step-foo'}" in notes
    assert "resuming from step-6 instead of step-12, step-8" in notes
    assert resumed.resumed_from_step == 6 and resumed.steps == 8
    assert resumed.pairs_seen == whole.pairs_seen
    a = load_file(tmp_path / "a" / "checkpoints" / "step-8" / "model.safetensors")
    b = load_file(weights)  # step-8 trained again from step-6, and saved whole
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
