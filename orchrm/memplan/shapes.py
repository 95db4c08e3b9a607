"""A backbone's shapes read from its `config.json`, and what they imply for training:
parameters (all, and trainable under LoRA), the bytes each token keeps for the backward
pass, and the FLOPs of a training step. `orchrm.memplan.plan` composes these into a plan.

Nothing is loaded: only the config's numbers are read. The families are the decoders
orchrm trains as reward models (Llama, Mistral, Qwen2, Qwen3, Gemma), read at the last
token by a one-output `score` head, and BERT-style encoders (the offline MiniLM), read at
[CLS] through the pooler and a one-output `classifier`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import ConfigError

DECODERS = ("llama", "mistral", "qwen2", "qwen3", "gemma")
ENCODERS = ("bert",)


@dataclass(frozen=True)
class Backbone:
    """The shapes of a backbone, as its config gives them."""

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    """Read for completeness: a sequence-classification model has no LM head, so tying
    changes no count."""
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    max_position_embeddings: int = 0
    """Learned positions (BERT); decoders use rotary positions (no parameters)."""
    type_vocab_size: int = 0

    @property
    def encoder(self) -> bool:
        return self.model_type in ENCODERS

    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    def linears(self) -> list[tuple[int, int, bool]]:
        """(in, out, has bias) of every linear layer of one transformer layer: the layers
        PEFT's `all-linear` wraps."""
        h, i, q, kv = self.hidden_size, self.intermediate_size, self.q_width, self.kv_width
        if self.encoder:
            return [(h, h, True)] * 4 + [(h, i, True), (i, h, True)]
        attention = [(h, q, self.qkv_bias), (h, kv, self.qkv_bias), (h, kv, self.qkv_bias)]
        mlp = [(h, i, self.mlp_bias), (h, i, self.mlp_bias), (i, h, self.mlp_bias)]
        return [*attention, (q, h, self.o_bias), *mlp]


def _read_config(config_or_path) -> dict:
    """The config as a dict: a dict, a Hugging Face config object, a `config.json`, or
    a model directory holding one."""
    if isinstance(config_or_path, dict):
        return config_or_path
    if hasattr(config_or_path, "to_dict"):
        return config_or_path.to_dict()
    path = Path(config_or_path)
    if path.is_dir():
        path = path / "config.json"
    try:
        config = json.loads(path.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read the backbone config {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path} line {err.lineno}: not JSON ({err.msg})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config is a JSON object, not {type(config).__name__}")
    return config


def _number(config: dict, key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise ConfigError(f"{where}: the config has no {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: {key!r} must be a whole number, not {value!r}")
    return value


def read_backbone(config_or_path) -> Backbone:
    """The `Backbone` of a config given as a dict, a config object, a `config.json` or a
    model directory; `ConfigError` for a family it does not know or a missing shape."""
    config = _read_config(config_or_path)
    where = config_or_path if isinstance(config_or_path, str | Path) else "the backbone config"
    model_type = config.get("model_type")
    if model_type not in DECODERS + ENCODERS:
        known = ", ".join(DECODERS + ENCODERS)
        raise ConfigError(f"{where}: model_type {model_type!r} is not one the plan knows ({known})")
    h = _number(config, "hidden_size", where)
    heads = _number(config, "num_attention_heads", where)
    if heads == 0:
        raise ConfigError(f"{where}: 'num_attention_heads' must be at least 1")
    # transformers' own defaults when a config leaves head_dim out
    default_head_dim = {"gemma": 256, "qwen3": 128}.get(model_type, h // heads)
    attention_bias = bool(config.get("attention_bias", False))
    return Backbone(
        model_type=model_type,
        hidden_size=h,
        intermediate_size=_number(config, "intermediate_size", where),
        num_layers=_number(config, "num_hidden_layers", where),
        num_heads=heads,
        num_kv_heads=_number(config, "num_key_value_heads", where, heads),
        head_dim=_number(config, "head_dim", where, default_head_dim) or default_head_dim,
        vocab_size=_number(config, "vocab_size", where),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=model_type in ("qwen2", "bert") or attention_bias,
        o_bias=model_type == "bert" or (attention_bias and model_type != "qwen2"),
        mlp_bias=model_type == "bert" or bool(config.get("mlp_bias", False)),
        max_position_embeddings=_number(config, "max_position_embeddings", where, 0)
        if model_type in ENCODERS
        else 0,
        type_vocab_size=_number(config, "type_vocab_size", where, 2)
        if model_type in ENCODERS
        else 0,
    )


@dataclass(frozen=True)
class Counts:
    """Parameters of the sequence-classification model, by where they sit."""

    embedding: int
    """Token embeddings (and BERT's positions, token types and their norm)."""
    layer: int
    """One transformer layer."""
    matmul: int
    """Weights of all layers' linear layers plus the head: what every token multiplies."""
    rest: int
    """Final norm, pooler, head."""
    head: int
    """The one-output head (`score` or `classifier`), trained fully under LoRA."""
    total: int
    lora: int
    """LoRA adapter parameters at the rank asked (0 without LoRA)."""


def count_parameters(backbone: Backbone, lora_r: int = 0) -> Counts:
    """Parameter counts of `AutoModelForSequenceClassification` with one label; `lora_r`
    adds the adapters PEFT's `target_modules="all-linear"` puts on every linear layer
    but the head (BERT's pooler included)."""
    b, h = backbone, backbone.hidden_size
    linears = b.linears()
    weights = sum(i * o for i, o, _ in linears)
    biases = sum(o for _, o, bias in linears if bias)
    if b.encoder:
        embedding = (b.vocab_size + b.max_position_embeddings + b.type_vocab_size) * h + 2 * h
        norms = 4 * h
        head = h + 1
        rest = h * h + h + head  # pooler, classifier
        adapted = [(i, o) for i, o, _ in linears] * b.num_layers + [(h, h)]
    else:
        embedding = b.vocab_size * h
        norms = 2 * h + (2 * b.head_dim if b.model_type == "qwen3" else 0)
        head = h
        rest = h + head  # final norm, score
        adapted = [(i, o) for i, o, _ in linears] * b.num_layers
    layer = weights + biases + norms
    lora = sum(lora_r * (i + o) for i, o in adapted) if lora_r else 0
    total = embedding + b.num_layers * layer + rest
    return Counts(embedding, layer, b.num_layers * weights + head, rest, head, total, lora)


@dataclass(frozen=True)
class Step:
    """One training micro-step's shape: what the bytes and FLOPs depend on."""

    texts: int
    """Texts per forward pass (2 per pair: chosen and rejected)."""
    length: int
    """Tokens per text (every text padded to the longest, taken at the maximum; packed
    texts: their mean)."""
    act_bytes: int
    """Bytes per activation element (2 for bf16, 4 for fp32)."""
    lora: bool
    lora_r: int
    attention: str
    """'eager' keeps each layer's L x L softmax per head; 'sdpa' (a fused kernel) keeps
    each layer's own copy of the padding mask, converted from bool to the model's dtype
    by PyTorch; 'flash' (flash-attention, unpadded) keeps neither, nor does 'packed' (the
    texts packed into one row, attention run per text: `orchrm.rmodel.packed`)."""

    @property
    def eager(self) -> bool:
        return self.attention == "eager"

    def scores_bytes(self, heads: int) -> int:
        """What one layer keeps of size L x L for the whole step."""
        if self.attention == "eager":  # the fp32 softmax, and its copy in the model's dtype
            return self.texts * heads * self.length**2 * (4 + (self.act_bytes % 4))
        if self.attention == "sdpa":
            return self.texts * self.length**2 * self.act_bytes
        return 0

    @property
    def tokens(self) -> int:
        return self.texts * self.length


def _norm_bytes(width: int, step: Step, gemma: bool) -> int:
    """Per token, an RMSNorm keeps its input upcast to fp32, the normalized value (for
    its weight's gradient, so not under LoRA) and its output (the next linear's input)."""
    a = step.act_bytes
    normalized = 0 if step.lora else (4 if gemma else a)
    return (4 + normalized + a) * width


def _lora_bytes(backbone: Backbone, step: Step, extra_linears: list[int]) -> int:
    """Per token, each LoRA layer keeps its rank-r activation; its input is the base
    layer's, kept once (a bf16 base's fp32 adapters read it in bf16 under autocast,
    `orchrm.training.build.add_lora`)."""
    if not step.lora:
        return 0
    ins = [i for i, _, _ in backbone.linears()] + extra_linears
    return len(ins) * step.act_bytes * step.lora_r


def layer_bytes(backbone: Backbone, step: Step) -> int:
    """Bytes one transformer layer keeps for the backward pass, for the whole step."""
    b, a, t = backbone, step.act_bytes, step.tokens
    h, i, q = b.hidden_size, b.intermediate_size, b.q_width
    # A fused kernel's log-sum-exp; its output is laid out as the next linear reads it,
    # so the attention output is one tensor either way.
    lse = 0 if step.eager else 4 * b.num_heads
    if b.encoder:
        # input, q, k, v, attention output, both norms' inputs (their mean and inverse
        # spread in fp32), the first norm's output; intermediate and GELU output.
        per_token = a * (8 * h + 2 * i) + 16 + lse + _lora_bytes(b, step, [])
        return per_token * t + step.scores_bytes(b.num_heads)
    gemma = b.model_type == "gemma"
    # q, k, v (k and v repeated to every query head whenever there is a padding mask),
    # the attention output.
    attention = a * 4 * q + lse
    qk_norm = (4 + a) * (q + b.kv_width) if b.model_type == "qwen3" else 0
    mlp = 4 * a * i  # gate output, activation output, up output, their product
    per_token = 2 * _norm_bytes(h, step, gemma) + attention + qk_norm + mlp
    per_token += _lora_bytes(b, step, [])
    return per_token * t + step.scores_bytes(b.num_heads)


def outside_layers_bytes(backbone: Backbone, step: Step) -> int:
    """What the embeddings, the final norm, the head and the shared attention mask keep."""
    b, a, t = backbone, step.act_bytes, step.tokens
    unpadded = step.attention in ("flash", "packed")
    mask = 0 if unpadded else step.texts * step.length**2 * (a if step.eager else 1)
    if b.encoder:
        return (a * b.hidden_size + 8) * t + mask
    final_norm = _norm_bytes(b.hidden_size, step, b.model_type == "gemma")
    rotary = 2 * a * b.head_dim
    return (final_norm + rotary + a) * t + mask


def backward_working_bytes(backbone: Backbone, step: Step) -> int:
    """Tensors in flight beyond what is kept, where the peak falls (the last layer's
    forward, or the start of the backward pass, which frees what it uses as it goes):
    about one of the MLP's width and two of the hidden width."""
    b, a = backbone, step.act_bytes
    return a * (b.intermediate_size + 2 * b.hidden_size) * step.tokens


def step_flops(backbone: Backbone, step: Step, counts: Counts, checkpointing: bool) -> int:
    """FLOPs of one forward and backward pass, per token summed over the step's tokens:
    matmuls 2N forward, 2N for the activations' gradients, 2N for the weights' (not with
    LoRA, whose adapters cost 6 N_lora); attention 4 * layers * L * heads * head_dim
    forward and twice that backward; gradient checkpointing runs the forward again."""
    n, attention = counts.matmul, 4 * backbone.num_layers * step.length * backbone.q_width
    forward = 2 * n + attention + (2 * counts.lora if step.lora else 0)
    backward = (2 * n if step.lora else 4 * n) + 2 * attention + 4 * counts.lora
    return (forward * (2 if checkpointing else 1) + backward) * step.tokens
