"""Rejection-sampling fine-tuning (RFT): sample, keep the best by execution, fine-tune.

Each round samples `RFTConfig.samples` orchestrations per training question from the current
policy, executes every valid one on the sub-agents, keeps one that answered right per
question (the cheapest to run, when several did; questions with none are skipped), and
fine-tunes on the kept (prompt, orchestration) pairs with `orchrm.rl.policy.sft`. Its
training tokens are the sampled policy tokens and every execution's sub-agent tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchrm.rl.config import PolicyConfig, RFTConfig
from orchrm.rl.policy import load_policy, policy_prompt, sample, save_policy, sft
from orchrm.rl.rewards import TokenLedger, run_plans, runnable
from orchrm.runtime.backend import ChatBackend
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem
from orchrm.tasks.grading import grade


def rft_round(
    model,
    tokenizer,
    rows: list[dict],
    policy: PolicyConfig,
    config: RFTConfig,
    backend: ChatBackend,
    run_config: RunConfig,
    seed: int,
    first_sample: int = 0,
) -> tuple[list[tuple[str, str]], dict]:
    """Sample and execute one round; returns the kept (prompt, completion) examples and
    the round's numbers (policy and execution tokens, correct share, kept)."""
    drawn = sample(
        model,
        tokenizer,
        [policy_prompt(r["question"]) for r in rows],
        config.samples,
        policy.max_completion_length,
        policy.temperature,
        seed,
        batch_size=256,
        progress=policy.progress,
        description="RFT sampling",
    )
    items, where = [], []
    for i, (row, group) in enumerate(zip(rows, drawn, strict=True)):
        for s, d in enumerate(group):
            o = runnable(d.text)
            if o is not None:
                items.append(RunItem(o, row["question"], row["task_id"], first_sample + len(items)))
                where.append((i, s))
    results = run_plans(backend, run_config, items)
    best: dict[int, tuple[int, int]] = {}  # row -> (execution tokens, sample)
    right = 0
    for (i, s), result in zip(where, results, strict=True):
        if grade(result.answer, rows[i]["answer"], rows[i]["domain"]):
            right += 1
            if i not in best or result.total_tokens < best[i][0]:
                best[i] = (result.total_tokens, s)
    kept = [(policy_prompt(rows[i]["question"]), drawn[i][s].text) for i, (_, s) in best.items()]
    numbers = {
        "policy": sum(d.tokens for group in drawn for d in group),
        "execution": sum(r.total_tokens for r in results),
        "correct": right / max(1, len(rows) * config.samples),
        "kept": len(kept),
        "executions": len(items),
    }
    return kept, numbers


def train_rft(
    policy: PolicyConfig,
    config: RFTConfig,
    rows: list[dict],
    backend: ChatBackend,
    run_config: RunConfig,
    ledger: TokenLedger,
    out: Path,
    after_round: Callable[[object, int], None] | None = None,
):
    """`config.rounds` rounds splitting `policy.steps` supervised steps, starting from
    `policy.model`, on the prompt `rows` (`prompt`, `question`, `task_id`, `answer`,
    `domain`) executed on `backend`; the policy after each round is saved under
    OUT/checkpoints/round-N, the final one in OUT/model. `after_round(model, step)` runs
    after each round (the training curve)."""
    model, tokenizer = load_policy(policy.require_model())
    rounds = config.rounds
    done, executed = 0, 0
    for n in range(rounds):
        steps = policy.steps * (n + 1) // rounds - done
        kept, numbers = rft_round(
            model, tokenizer, rows, policy, config, backend, run_config, policy.seed + n, executed
        )
        executed += numbers.pop("executions")
        ledger.add(done, **numbers)
        if kept:
            sft(
                model,
                tokenizer,
                kept,
                steps,
                config.batch_size,
                policy.lr,
                policy.seed + n,
                policy.progress,
                f"RFT round {n + 1}/{rounds}",
            )
        done += steps
        save_policy(model, tokenizer, out / "checkpoints" / f"round-{n + 1}")
        if after_round is not None:
            after_round(model, done)
    save_policy(model, tokenizer, out / "model")
    return model, tokenizer
