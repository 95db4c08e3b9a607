"""`TrainConfig`: everything `orchrm train` can set, with defaults that work offline."""

from __future__ import annotations

import importlib.util
from dataclasses import field
from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.rmodel.ensemble import AGGREGATES, DEFAULT_AGGREGATE, DEFAULT_SPREAD_WEIGHT
from orchrm.rmodel.precision import DTYPES
from orchrm.store.config import MAX_LENGTH
from orchrm.training.tracking import REPORT_TO, check_report_to

SMALL_DATA_STEPS = 180
"""Training steps (batch 16) of the reward models `orchrm demo` and `orchrm rl` build on
the world's few thousand pairs."""
SMALL_DATA_LR = 1e-4
"""Their learning rate. Measured on world seed 10 (`benchmarks/rm_scaling.py --lr`): at
5e-5 MiniLM reads the question's hint later, at 2e-4 it does not learn it."""


@config
class TrainConfig:
    """How a Bradley-Terry reward model is trained on win/lose pairs."""

    pairs: str = setting("", panel="Data")
    """Folder with `train` and `validation` files from `orchrm pairs export` (JSONL or
    Parquet), or one such file (then `validation_share` of its tasks are held out)."""
    out: str = setting("runs/rm", panel="Output")
    """Where the model (a Hugging Face directory) and checkpoints are written."""
    backbone: str = setting("", panel="Model")
    """Any Hugging Face sequence-classification model directory or hub id available
    locally, or a `.gguf` file of an architecture transformers reads from GGUF (Llama,
    Qwen2/3, Mistral, Gemma, ...; dequantized to the training precision; needs the `gguf`
    package); empty: the offline MiniLM (see `default_backbone`)."""
    max_length: int = setting(MAX_LENGTH, min=2, panel="Data")
    """Tokens per orchestration text; longer ones are truncated from the end (the
    rendering puts the thinking last), never dropped. Count them in the export with
    `orchrm pairs export --tokenizer` to cut by the rendering budget instead."""
    epochs: float = setting(1.0, above=0.0, panel="Optimization")
    """Passes over the training pairs (fractions allowed)."""
    max_steps: int | None = setting(None, min=1, panel="Optimization")
    """Stop after this many optimizer steps (overrides `epochs` when smaller)."""
    batch_size: int = setting(16, min=1, panel="Optimization")
    """Pairs per forward pass and process (each pass reads 2 x batch_size texts); with
    `max_tokens_per_batch`, an optimizer step still reads batch_size x grad_accumulation
    pairs per process, in as many passes as the budget needs."""
    grad_accumulation: int = setting(1, min=1, panel="Optimization")
    """Forward passes per optimizer step (with `max_tokens_per_batch`: multiplies the
    pairs per step instead)."""
    max_tokens_per_batch: int | None = setting(None, min=2, panel="Scale")
    """Token budget of one forward pass: pairs of similar length are grouped so that 2
    texts x the longest x pairs stays within it, and gradients are accumulated over the
    passes of a step, each pair weighing the same; a pair alone over it is trained alone.
    None: `batch_size` pairs per pass whatever their length."""
    forward_passes: int = setting(4, min=1, panel="Scale")
    """Forward passes per micro-batch of padded texts: its texts, sorted by length, are
    cut into this many passes that each pad to their own longest text, with one backward
    pass over them all (the same gradients as one pass, with less padding). Sharded runs
    (ZeRO-3, FSDP) use 1; a packed micro-batch (`packing`) is one pass. Measured in
    docs/results.md#minilm."""
    packing: bool = setting(True, panel="Scale")
    """Decoders: the texts of a micro-batch packed end to end into one row, with no
    padding, each text attending only to itself and read at its own last token (the
    padded pass's rewards and gradients, docs/train.md#padding-free-decoders); with
    `sdpa` or `flash_attention_2` attention and no sliding window. Off, or an encoder:
    padded passes (`forward_passes`)."""
    sort_batches: int = setting(1, min=1, panel="Scale")
    """Batches whose pairs are sorted by length together, so that each holds pairs of
    similar length. 1: every batch is a random draw, as TRL's reward trainer makes it;
    more pads less but makes batches that are not random samples, which gained neither
    speed nor accuracy on MiniLM at 256 tokens (docs/results.md#minilm)."""
    task_batches: bool = setting(False, panel="Scale")
    """Fill each batch with pairs of one task that share plans (a task's winners are each
    paired with each of its losers), so that a plan in several pairs of a batch is
    computed once there, as InstructGPT trains on all the comparisons of a prompt at once
    (`orchrm.training.batching.task_batches`): the same pairs and steps as random
    batches, about half the texts computed on the world's pairs, and batches that are not
    random samples (docs/results.md#minilm: a step twice as fast, a less accurate model
    at the same steps, level at twice the steps). Off: random batches, as TRL draws them.
    Not with `sort_batches` above 1."""
    lr: float = setting(5e-5, above=0.0, panel="Optimization")
    """Peak learning rate (AdamW)."""
    reuse_heap: bool = setting(False, panel="Optimization")
    """On a CPU with glibc (Linux), large tensors come from the heap, which keeps freed
    memory for later ones, instead of each from a fresh mapping whose pages the kernel
    faults in and zeroes (`orchrm.training.heap`). Faster where page faults are slow and
    tensors pass 32 MiB, at several times the peak memory (docs/train.md, "Reused
    heap"). Free pages go back after each pass."""
    head_lr: float | None = setting(None, min=0.0, panel="Optimization")
    """Peak learning rate of the freshly initialized score head (the parameters outside
    the backbone's base model); None: `lr`. Ignored with LoRA (PEFT trains the head)."""
    weight_decay: float = setting(0.0, min=0.0, panel="Optimization")
    """AdamW weight decay."""
    max_grad_norm: float = setting(1.0, min=0.0, panel="Optimization")
    """Clip the gradients' global norm to this before each optimizer step, as TRL's
    reward trainer and the Hugging Face Trainer do by default: a rare large gradient
    early on can otherwise stall a small-data run (docs/results.md#why-the-defaults).
    0: no clipping."""
    disable_dropout: bool = setting(True, panel="Optimization")
    """Turn dropout off, as TRL's reward trainer does by default: on a CPU it is also what
    lets attention use its fast kernel (docs/results.md#why-the-defaults)."""
    warmup_ratio: float = setting(0.1, min=0.0, max=1.0, panel="Optimization")
    """Share of the steps spent warming up linearly; then linear decay to 0."""
    margin: bool = setting(False, panel="Data")
    """Use each pair's `margin` field in the loss: -log sigmoid(r_c - r_r - margin)."""
    soft_labels: bool = setting(False, panel="Data")
    """Read each pair's `weight` (the probability that its chosen side is the better,
    from `orchrm pairs mine --denoise`; 1 where absent) as a soft label: -(w log
    sigmoid(d) + (1 - w) log sigmoid(-d)) with d = r_c - r_r. Weights of 1 train exactly
    as without it."""
    center_rewards: float | None = setting(None, min=0.0, panel="Optimization")
    """Coefficient of the reward-centering term mean((r_c + r_r)^2), as in TRL."""
    dtype: Literal[DTYPES] = setting("auto", panel="Model")
    """Training precision. bf16: computed in bfloat16 (autocast); with LoRA the frozen
    base is loaded in bf16 and the adapters and score head are kept in fp32; with full
    fine-tuning the weights stay fp32, the master copy the optimizer updates. auto: bf16
    where the hardware runs it fast (CUDA with bf16, or a CPU with AMX), else fp32."""
    bf16: bool | None = setting(None, panel="Model")
    """Shorthand for `dtype`: True is bf16, False fp32; None: `dtype` decides."""
    gradient_checkpointing: bool | None = setting(None, panel="Scale")
    """Recompute activations in the backward pass instead of keeping them (less memory,
    one more forward pass of compute). None: on with CUDA for LoRA or a backbone over
    1e9 parameters, else off."""
    attn_implementation: Literal["sdpa", "flash_attention_2", "eager"] = setting(
        "sdpa", panel="Scale"
    )
    """Attention kernel: PyTorch's scaled-dot-product attention, FlashAttention 2 (needs
    the `flash_attn` package, CUDA and bf16), or the plain eager one."""
    peak_flops: float | None = setting(None, min=0.0, panel="Scale")
    """Peak FLOP/s of one device, for MFU; None: the dense bf16 peak of a known CUDA GPU,
    and no MFU on a CPU."""
    eval_every: int = setting(50, min=1, panel="Output")
    """Steps between validation passes (and checkpoints)."""
    early_stopping: int | None = setting(None, min=1, panel="Output")
    """Stop when validation accuracy has not improved for this many evaluations."""
    save_every: int | None = setting(None, min=1, panel="Output")
    """Steps between resumable checkpoints; None: at every evaluation."""
    keep_checkpoints: int = setting(2, min=1, panel="Output")
    """Most recent checkpoints kept on disk."""
    report_to: Literal[REPORT_TO] = setting("none", panel="Output")
    """Where the run's scalars go as it trains: `tensorboard` (event files under
    OUT/runs/), `wandb` (project orchrm; WANDB_MODE=offline without a network) or
    `none`. Per step: loss, pairwise accuracy overall and by pair kind, reward margin and
    its spread, learning rate, gradient norm, tokens/s and MFU; per validation pass: its
    accuracy by kind and domain, reward margin, mean and spread."""
    lora: bool = setting(False, panel="Model")
    """Train LoRA adapters (PEFT) instead of all weights; the score head is trained
    fully; the saved model has the adapters merged (a standard checkpoint)."""
    lora_r: int = setting(32, min=1, panel="Model")
    """LoRA rank."""
    lora_alpha: int = setting(32, min=1, panel="Model")
    """LoRA scaling numerator (updates scale by lora_alpha / lora_r)."""
    lora_dropout: float = setting(0.05, min=0.0, below=1.0, panel="Model")
    """Dropout on the LoRA adapters' input."""
    seed: int = setting(0, panel="Optimization")
    """Seeds the data order, the head's initialization and dropout."""
    validation_share: float = setting(0.1, min=0.0, max=1.0, panel="Data")
    """Share of tasks held out when `pairs` is a single file."""
    trust_remote_code: bool = setting(False, panel="Model")
    """Let a backbone run code shipped with it (off unless asked)."""
    num_threads: int | None = setting(None, min=1, panel="Scale")
    """CPU threads for PyTorch; None: its default."""
    ensemble: int = setting(1, min=1, panel="Ensemble")
    """Members of a reward-model ensemble: K models trained with seeds seed, seed+1, ...
    (and, with `bootstrap`, each on its own resample of the training pairs) into one
    model directory whose weights are the members' average and whose scorer reports
    each item's spread (`orchrm.rmodel.ensemble`). 1: one model."""
    bootstrap: bool = setting(True, panel="Ensemble")
    """With `ensemble` above 1: each member trains on a draw with replacement of as many
    training tasks' pairs as there are (a task's pairs stay together)."""
    aggregate: Literal[AGGREGATES] = setting(DEFAULT_AGGREGATE, panel="Ensemble")
    """The ensemble's default score: min (the worst member's: on the world's math preset
    the one aggregate whose best-of-N pick did not turn down by N = 256), mean,
    mean_minus_std (mean minus `spread_weight` x spread) or warm (the averaged weights
    alone); a scorer may choose another."""
    spread_weight: float = setting(DEFAULT_SPREAD_WEIGHT, min=0.0, panel="Ensemble")
    """lambda of mean_minus_std."""
    extra: dict = field(default_factory=dict, metadata={"panel": "Output"})
    """Free-form notes stored in the checkpoint metadata."""

    def __post_init__(self) -> None:
        check_report_to(self.report_to)
        if self.bf16 is not None and self.dtype != "auto" and self.bf16 != (self.dtype == "bf16"):
            raise ConfigError(f"bf16={self.bf16} contradicts dtype={self.dtype!r}: set one")
        if self.attn_implementation == "flash_attention_2":
            if importlib.util.find_spec("flash_attn") is None:
                raise ConfigError(
                    "attn_implementation flash_attention_2 needs the flash_attn package, "
                    "which is not installed: pip install flash-attn, or use sdpa"
                )
            if self.precision() == "fp32":
                raise ConfigError("attn_implementation flash_attention_2 runs in bf16 only")
        if self.task_batches and self.sort_batches > 1:
            raise ConfigError(
                f"task_batches fills batches by task and sort_batches={self.sort_batches} "
                "sorts them by length: set one"
            )

    def checkpointing(self, parameters: float, cuda: bool) -> bool:
        """Whether training recomputes activations: `gradient_checkpointing`, else on with
        CUDA for LoRA or a backbone of over 1e9 `parameters`."""
        if self.gradient_checkpointing is not None:
            return self.gradient_checkpointing
        return cuda and (self.lora or parameters > 1e9)

    def pairs_per_pass(self) -> int:
        """Pairs a forward pass holds at the longest texts: `batch_size`, fewer when
        `max_tokens_per_batch` holds fewer texts of `max_length`."""
        if not self.max_tokens_per_batch:
            return self.batch_size
        return max(1, min(self.batch_size, self.max_tokens_per_batch // (2 * self.max_length)))

    def precision(self) -> str:
        """`dtype` with the `bf16` shorthand applied: auto, bf16 or fp32."""
        if self.bf16 is None:
            return self.dtype
        return "bf16" if self.bf16 else "fp32"


@config
class TrainRunConfig(TrainConfig):
    """`TrainConfig`, and what `orchrm train` does with an OUT an earlier run left, or
    whether it only plans the training (`orchrm plan-memory` with these settings)."""

    resume: bool = False
    """Continue from the last checkpoint."""
    overwrite: bool = False
    """Train again into an OUT that holds a model or checkpoints: this run starts at step
    0, removes the earlier run's checkpoints once its pairs and model have loaded, and
    replaces its model when it saves. Without it (or --resume) such an OUT is refused."""
    plan: bool = False
    """Print the memory and time plan of this training and exit (`orchrm plan-memory`
    with these settings): nothing is loaded but the backbone's config."""
    devices: int = setting(1, min=1)
    """With --plan: devices to shard over."""
    zero_stage: int = setting(0, min=0, max=3)
    """With --plan: the ZeRO stage (0: none)."""
