"""The training plan (orchrm.memplan.plan): its counts equal real Hugging Face models', its
memory equals what a real training step holds on this CPU, and it reads and prints as a
user needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from orchrm.errors import ConfigError
from orchrm.memplan.plan import GPUS, PRESETS, PlanSettings, plan_from_train_config, plan_training
from orchrm.memplan.probe import Probe, measure_all
from orchrm.memplan.shapes import count_parameters, read_backbone
from orchrm.memplan.text import plan_text
from orchrm.rmodel.tokens import default_backbone
from orchrm.training.build import add_lora
from orchrm.training.config import TrainConfig
from tests.conftest import run_orchrm

TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "vocab_size": 500}
FAMILIES = {
    "llama-gqa": {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 2},
    "llama-biases": {
        "model_type": "llama",
        "num_attention_heads": 4,
        "attention_bias": True,
        "mlp_bias": True,
    },
    "mistral": {"model_type": "mistral", "num_attention_heads": 4, "num_key_value_heads": 1},
    "qwen2": {"model_type": "qwen2", "num_attention_heads": 4, "num_key_value_heads": 2},
    "qwen3": {"model_type": "qwen3", "num_attention_heads": 4, "num_key_value_heads": 2},
    "gemma": {"model_type": "gemma", "num_attention_heads": 2, "head_dim": 48},
    "bert": {"model_type": "bert", "num_attention_heads": 4, "max_position_embeddings": 128},
}


def _hf_config(settings: dict):
    settings = {**TINY, **settings}
    return AutoConfig.for_model(
        settings.pop("model_type"), num_labels=1, pad_token_id=0, **settings
    )


def _numel(model, trainable: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_parameter_counts_equal_the_real_models(family):
    config = _hf_config(FAMILIES[family])
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config)
    counts = count_parameters(read_backbone(config.to_dict()), lora_r=8)
    assert counts.total == _numel(model)
    plan = plan_training(config.to_dict(), max_length=16, micro_batch_pairs=1, lora=True, lora_r=8)
    assert plan.parameters == _numel(model)
    wrapped = add_lora(model, r=8, alpha=8, dropout=0.0)  # orchrm's LoRA: all-linear + head
    assert plan.trainable_parameters == counts.lora + counts.head == _numel(wrapped, True)
    # PEFT keeps the original head beside its trained copy.
    assert counts.total + counts.lora + counts.head == _numel(wrapped)


def test_the_real_minilm_and_the_papers_llama_are_counted_right():
    minilm = AutoModelForSequenceClassification.from_pretrained(default_backbone(), num_labels=1)
    assert plan_training(default_backbone(), max_length=8, micro_batch_pairs=1).parameters == (
        _numel(minilm)
    )
    # Llama-3.1-8B has 8,030,261,248 parameters with its LM head; a reward model swaps the
    # 128256 x 4096 head for a one-output score.
    llama = plan_training("llama-3.1-8b", max_length=8, micro_batch_pairs=1, peak_flops=1e12)
    assert llama.parameters == 8_030_261_248 - 128256 * 4096 + 4096


def test_a_model_directory_its_config_file_and_the_dict_plan_alike(tmp_path):
    config = _hf_config(FAMILIES["qwen2"])
    config.save_pretrained(tmp_path)
    plans = [
        plan_training(source, max_length=64, micro_batch_pairs=2, peak_flops="A100")
        for source in (tmp_path, tmp_path / "config.json", config.to_dict(), config)
    ]
    first = plans[0].to_dict()
    for plan in plans[1:]:
        assert {**plan.to_dict(), "backbone": first["backbone"]} == first


PROBE_LLAMA = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 1024,
}
PROBE_BERT = {
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "max_position_embeddings": 1024,
}


def _peak_memory_resettable() -> bool:
    """Whether this kernel lets a process restart its peak-memory mark (VmHWM), which the
    memory probe needs: Linux 4.0 and later do; gVisor and other sandboxes may not."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return "VmHWM:" in Path("/proc/self/status").read_text()
    except OSError:
        return False


PROBES = {
    "llama": Probe(PROBE_LLAMA, max_length=512, micro_batch_pairs=2),
    "llama-lora-eager": Probe(
        PROBE_LLAMA, max_length=512, micro_batch_pairs=2, lora=True, attn_implementation="eager"
    ),
    "llama-checkpointed": Probe(
        PROBE_LLAMA, max_length=1024, micro_batch_pairs=1, gradient_checkpointing=True
    ),
    "llama-packed": Probe(PROBE_LLAMA, max_length=1024, micro_batch_pairs=2, packing=True),
    "bert": Probe(PROBE_BERT, max_length=512, micro_batch_pairs=2),
    "bert-lora-checkpointed": Probe(
        PROBE_BERT, max_length=1024, micro_batch_pairs=2, lora=True, gradient_checkpointing=True
    ),
}
"""Full fine-tune and LoRA, SDPA and eager attention, padded and packed, with and
without gradient checkpointing, on both families; `make test` measures three that cover
each of these but packing."""
SLOW = pytest.mark.slow  # make test-slow: the other two settings


@pytest.mark.skipif(
    not _peak_memory_resettable(), reason="needs /proc/self/clear_refs and VmHWM (Linux)"
)
@pytest.mark.parametrize(
    "names",
    [
        ("llama-lora-eager", "llama-checkpointed", "bert"),
        pytest.param(("llama", "llama-packed", "bert-lora-checkpointed"), marks=SLOW),
    ],
    ids=["main", "more"],
)
def test_planned_peak_memory_is_within_a_quarter_of_a_measured_training_step(names):
    """Real steps (forward, backward, fused AdamW) of random fp32 models in a fresh
    process (`PROBES`). Each peak is a few hundred MB, far above the noise."""
    probes = [PROBES[name] for name in names]
    measured = measure_all(probes, timeout=300)
    report = []
    for probe, got in zip(probes, measured, strict=True):
        plan = plan_training(
            probe.config,
            max_length=probe.max_length,
            micro_batch_pairs=probe.micro_batch_pairs,
            dtype="fp32",
            lora=probe.lora,
            lora_r=probe.lora_r,
            gradient_checkpointing=probe.gradient_checkpointing,
            attn_implementation=probe.attn_implementation,
            packing=probe.packing,
            peak_flops=1e12,
        )
        # PEFT's model holds the adapters and the head's trained copy beside the base.
        added = plan.trainable_parameters if probe.lora else 0
        assert (plan.parameters + added, plan.trainable_parameters) == (
            got.parameters,
            got.trainable_parameters,
        )
        assert plan.memory.total >= plan.memory.peak
        ratio = plan.memory.peak / got.peak_bytes
        setting = (probe.config["model_type"], probe.max_length, probe.lora)
        setting += (probe.gradient_checkpointing, probe.attn_implementation)
        report.append((setting, got.peak_bytes // 2**20, round(ratio, 2)))
    assert all(mib > 150 for _, mib, _ in report), report
    assert all(0.75 <= ratio <= 1.25 for _, _, ratio in report), report


def test_a_packed_plan_counts_the_texts_own_tokens_and_no_mask():
    padded = plan_training(PROBE_LLAMA, max_length=2048, micro_batch_pairs=4, lora=True)
    packed = plan_training(PROBE_LLAMA, max_length=2048, micro_batch_pairs=4, lora=True,
                           packing=True)  # fmt: skip
    half = plan_training(PROBE_LLAMA, max_length=2048, micro_batch_pairs=4, lora=True,
                         packing=True, mean_length=1024)  # fmt: skip
    assert packed.tokens_per_step == padded.tokens_per_step == 8 * 2048
    assert half.tokens_per_step == 8 * 1024
    # no L x L mask: every layer's copy of it and the shared one are gone
    assert packed.memory.activations_saved < padded.memory.activations_saved
    assert half.memory.activations_saved < 0.55 * packed.memory.activations_saved
    assert any(note.startswith("packed") for note in packed.notes)
    # an encoder is never packed; neither is eager attention
    bert = plan_training(PROBE_BERT, max_length=512, micro_batch_pairs=2, packing=True,
                         mean_length=100)  # fmt: skip
    assert bert.tokens_per_step == 4 * 512
    eager = plan_training(PROBE_LLAMA, max_length=512, micro_batch_pairs=2, packing=True,
                          attn_implementation="eager")  # fmt: skip
    assert eager.memory.peak == plan_training(PROBE_LLAMA, max_length=512, micro_batch_pairs=2,
                                              attn_implementation="eager").memory.peak  # fmt: skip


def test_zero_stages_shard_optimizer_then_gradients_then_weights():
    plan = plan_training(
        "llama-3.1-8b",
        max_length=1024,
        micro_batch_pairs=1,
        dtype="bf16",
        gradient_checkpointing=True,
        num_devices=8,
        zero_stage=3,
        peak_flops="H100",
    )
    n = plan.parameters
    by = {m.zero_stage: m for m in plan.table if m.gradient_checkpointing}
    # bf16 full fine-tune: 2-byte weights and gradients, fp32 moments and master copy.
    assert (by[0].weights, by[0].gradients, by[0].optimizer) == (2 * n, 2 * n, 12 * n)
    assert (by[1].weights, by[1].gradients, by[1].optimizer) == (2 * n, 2 * n, 12 * n // 8)
    assert (by[2].weights, by[2].gradients) == (2 * n, 2 * n // 8)
    assert by[3].weights == 2 * n // 8 and by[3].gathered > 0 == by[2].gathered
    assert len({m.activations for m in by.values()}) == 1
    assert plan.memory is by[3] or plan.memory == by[3]
    fp32 = plan_training("llama-3.1-8b", max_length=1024, micro_batch_pairs=1, dtype="fp32")
    assert (fp32.memory.weights, fp32.memory.optimizer) == (4 * n, 8 * n)
    # LoRA: a bf16 frozen base; adapters and the head's copy trained in fp32.
    lora = plan_training("llama-3.1-8b", max_length=1024, micro_batch_pairs=1, lora=True)
    trained = lora.trainable_parameters
    assert (lora.memory.weights, lora.memory.gradients, lora.memory.optimizer) == (
        2 * n + 4 * trained,
        4 * trained,
        8 * trained,
    )


def test_checkpointing_left_open_turns_on_only_when_needed():
    ask = {"max_length": 4096, "micro_batch_pairs": 2, "lora": True, "peak_flops": "H100"}
    small = plan_training("llama-3.1-8b", **ask)
    assert small.gradient_checkpointing and small.fits  # 80 GiB: without it, no
    assert not plan_training(
        "llama-3.1-8b", **{**ask, "micro_batch_pairs": 1}
    ).gradient_checkpointing
    roomy = plan_training("llama-3.1-8b", **ask, device_memory=1024**4)
    assert not roomy.gradient_checkpointing
    unknown = plan_training("llama-3.1-8b", max_length=4096, micro_batch_pairs=1, peak_flops=1e15)
    assert not unknown.gradient_checkpointing and unknown.fits is None


def test_step_time_follows_the_written_formula():
    plan = plan_training(
        "llama-3.1-8b",
        max_length=2048,
        micro_batch_pairs=2,
        gradient_checkpointing=False,
        peak_flops="H200",
    )
    b = read_backbone(PRESETS["llama-3.1-8b"])
    n = count_parameters(b).matmul
    per_token = 6 * n + 12 * b.num_layers * 2048 * b.num_heads * b.head_dim
    assert plan.flops_per_step == per_token * 4 * 2048
    assert plan.step_seconds == pytest.approx(plan.flops_per_step / (0.35 * GPUS["H200"][0]))
    assert plan.pairs_per_second == pytest.approx(2 / plan.step_seconds)
    lora = plan_training(
        "llama-3.1-8b",
        max_length=2048,
        micro_batch_pairs=2,
        lora=True,
        gradient_checkpointing=False,
        peak_flops="H200",
    )
    assert 0.6 < lora.flops_per_step / plan.flops_per_step < 0.8  # 4N of 6N, plus attention
    recomputed = plan_training(
        "llama-3.1-8b",
        max_length=2048,
        micro_batch_pairs=2,
        gradient_checkpointing=True,
        peak_flops="H200",
    )
    forward = 2 * n + 4 * b.num_layers * 2048 * b.num_heads * b.head_dim
    assert recomputed.flops_per_step == plan.flops_per_step + forward * 4 * 2048


def test_on_a_cpu_the_step_time_asks_for_the_peak_flops():
    if torch.cuda.is_available():
        pytest.skip("a GPU gives its own peak")
    plan = plan_training("llama-3.1-8b", max_length=512, micro_batch_pairs=1)
    assert plan.step_seconds is None and "give the peak FLOP/s" in plan_text(plan)


@pytest.mark.parametrize("width", [80, 64])
def test_the_text_fits_its_width_and_says_the_asked_column(width):
    plan = plan_training(
        "llama-3.1-8b",
        max_length=4096,
        micro_batch_pairs=1,
        lora=True,
        gradient_checkpointing=True,
        zero_stage=3,
        num_devices=8,
        peak_flops="H100",
    )
    text = plan_text(plan, width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "ZeRO-3*" in text and "fits in 80.0 GiB" in text and "8 devices" in text
    assert json.loads(json.dumps(plan.to_dict()))["memory"]["zero_stage"] == 3


def test_settings_that_cannot_be_planned_say_what_and_where(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    with pytest.raises(ConfigError, match=r"config.json line 2"):
        plan_training(bad, max_length=8, micro_batch_pairs=1)
    with pytest.raises(ConfigError, match="model_type 't5'"):
        plan_training({"model_type": "t5"}, max_length=8, micro_batch_pairs=1)
    with pytest.raises(ConfigError, match="no 'intermediate_size'"):
        plan_training({**PROBE_LLAMA, "intermediate_size": None}, max_length=8, micro_batch_pairs=1)
    with pytest.raises(ConfigError, match="zero_stage"):
        plan_training(PROBE_LLAMA, max_length=8, micro_batch_pairs=1, zero_stage=4)
    with pytest.raises(ConfigError, match="'TPU' is no GPU"):
        plan_training(PROBE_LLAMA, max_length=8, micro_batch_pairs=1, peak_flops="TPU")
    with pytest.raises(ConfigError, match="cannot read the backbone config"):
        plan_training(tmp_path / "missing", max_length=8, micro_batch_pairs=1)


def test_settings_go_as_one_object_or_as_keywords_and_the_plan_holds_them():
    settings = PlanSettings(max_length=1024, micro_batch_pairs=2, lora=True, peak_flops="H100")
    as_object = plan_training("llama-3.1-8b", settings, zero_stage=2, num_devices=4)
    as_keywords = plan_training(
        "llama-3.1-8b",
        max_length=1024,
        micro_batch_pairs=2,
        lora=True,
        peak_flops="H100",
        zero_stage=2,
        num_devices=4,
    )
    assert as_object == as_keywords
    assert (as_object.max_length, as_object.zero_stage, as_object.lora_r) == (1024, 2, 32)
    # What the plan chose or looked up stands in place of what was left open.
    assert as_object.peak_flops == GPUS["H100"][0] and as_object.device_memory == GPUS["H100"][2]
    assert isinstance(as_object.gradient_checkpointing, bool)
    assert settings.zero_stage == 0  # the options given on top leave the settings as they are
    with pytest.raises(ConfigError, match="lora_r should be greater than or equal to 1"):
        plan_training("llama-3.1-8b", settings, lora_r=0)


@pytest.mark.parametrize("forced", ["1", "0"])
def test_a_train_config_is_planned_with_or_without_the_new_fields(forced, tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHRM_BF16", forced)
    _hf_config(FAMILIES["llama-gqa"]).save_pretrained(tmp_path)
    plain = plan_from_train_config(
        TrainConfig(backbone=str(tmp_path), max_length=128, batch_size=4, lora=True, lora_r=8)
    )
    assert (plain.micro_batch_pairs, plain.lora_r, plain.model_type) == (4, 8, "llama")
    # dtype auto and checkpointing None resolve as orchrm train resolves them here.
    cuda = torch.cuda.is_available()
    assert plain.dtype == ("bf16" if forced == "1" else "fp32")
    assert plain.attn_implementation == "sdpa"
    assert plain.gradient_checkpointing == cuda
    newer = TrainConfig(
        backbone=str(tmp_path),
        max_length=128,
        batch_size=4,
        dtype="bf16",
        gradient_checkpointing=True,
        attn_implementation="eager",
        max_tokens_per_batch=512,
        peak_flops=1e14,
    )
    plan = plan_from_train_config(newer, num_devices=2, zero_stage=2)
    assert (plan.dtype, plan.gradient_checkpointing, plan.attn_implementation) == (
        "bf16",
        True,
        "eager",
    )
    assert plan.micro_batch_pairs == 2 and plan.memory.zero_stage == 2 and plan.step_seconds
    assert plan_from_train_config(TrainConfig()).model_type == "bert"  # the offline MiniLM


def test_the_command_prints_the_plan_and_one_line_for_a_bad_setting():
    command = [
        "plan-memory",
        "llama-3.1-8b",
        "--max-length",
        "4096",
    ]
    command += ["--micro-batch-pairs", "1"]
    done = run_orchrm(*command, "--lora", "--gradient-checkpointing", "--peak-flops", "H100")
    assert done.returncode == 0 and "peak, GC" in done.stdout and "1.2" in done.stdout
    done = run_orchrm(*command, "--num-devices", "0")
    assert done.returncode == 2 and "--num-devices" in done.stderr
    done = run_orchrm(*command, "--bf16", "--dtype", "fp32")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "bf16=True contradicts dtype='fp32'" in done.stderr
