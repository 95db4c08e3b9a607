"""The paper's second use on a real LLM: SmolLM2-135M-Instruct as the orchestrator,
trained with GRPO from one supervised warm-up, with Orch-RM's reward or with execution as
the reward, and its plans executed by the same model on llama.cpp before and after.

Stages, each kept in OUT and reused by a later run with the same settings:

1. **Reward model.** The real-execution benchmark's training side
   (`orchrm.experiments.real_exec.run`): the template orchestrators' plans for the training
   tasks, executed by SmolLM2 on llama.cpp, mined into pairs, a MiniLM reward model
   trained on them (OUT/rm/...). `RLRealSettings.rm` names one trained before instead.
2. **Warm-up.** Untrained, the model writes no plan that runs. A LoRA is fine-tuned
   on the base template orchestrator's plans for the training tasks (every plan
   structure alike, so the policy starts without knowing which suits which task),
   reading the full orchestrator prompt (`orchrm.rl.pretrained`). Measured: the share of
   sampled plans that parse and validate on held-out tasks, before and after.
3. **GRPO** from the warm-up, the same tasks, steps and sampling seeds for each reward:
   `orchrm` (the reward model scores each sampled plan; nothing executes) and
   `execution` (each sampled plan runs once on llama.cpp; 1 if the answer is right).
   A plan that does not parse or breaks a graph rule gets the reward's penalty.
   Training tokens are counted per step (OUT/grpo-METHOD/steps.jsonl): tokens the policy
   generated, the reward model read, and the sub-agents spent.
4. **Evaluation by executing.** On held-out tasks (drawn with the training tasks from
   one pool without replacement: no question in both), each policy
   (`warmup`: no further training, and each GRPO run) samples `eval_samples` plans a
   task with the same seed; each valid plan is executed `eval_runs` times with seeded
   calls; a task's expected accuracy is the mean success over its plans and runs (an
   invalid plan counts 0). Paired 95% BCa intervals over tasks compare the methods.

Every execution goes through one cache (OUT/executions.jsonl, as the real-execution
benchmark keeps it), so a resumed run executes only what is missing. OUT gets
report.md, report.json and reward.png (the reward and the valid share over steps).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from orchrm.errors import ConfigError
from orchrm.experiments.real_exec.cache import ExecutionCache, bind_setup
from orchrm.experiments.real_exec.run import reward_model
from orchrm.experiments.real_exec.settings import execution_setup
from orchrm.experiments.real_exec.tasks import (
    check_validation,
    draw_tasks,
    tasks_only,
    training_plans,
    write_task_files,
)
from orchrm.experiments.rl_real.config import (
    FULL,
    METHODS,
    QUICK,
    TRAIN_SEED,
    Executor,
    RLRealSettings,
    RLRealSizes,
    Serve,
    llama_clients,
)
from orchrm.experiments.rl_real.evaluate import (
    PolicyResult,
    build_report,
    evaluate,
    plot_rewards,
    report_text,
)
from orchrm.experiments.rl_real.train import Rewarder, grpo, warmup
from orchrm.rl.config import PENALTIES
from orchrm.rl.pretrained import load_pretrained

__all__ = ["FULL", "METHODS", "QUICK", "RLRealSettings", "RLRealSizes", "run"]


def _reward_model(settings: RLRealSettings, executor: Executor, train, say) -> Path:
    """Stage 1: the reward model's directory (`settings.rm`, or trained into OUT)."""
    if settings.rm:
        if not Path(settings.rm).is_dir():
            raise ConfigError(f"--rm {settings.rm}: no such directory")
        return Path(settings.rm)
    real = settings.real_exec()
    plans = training_plans(real, train)
    executor.run([p.at(TRAIN_SEED) for p in plans], "executing the reward model's plans")
    trained, _ = reward_model(real, plans, [TRAIN_SEED], executor.cache, say=say)
    return trained.model


def _opening(settings: RLRealSettings) -> str:
    """The run's first line: the policy, the tasks, the evaluation's and GRPO's sizes."""
    s = settings.sizes
    return (
        f"rl-real: policy {settings.policy} (LoRA r={settings.lora_r}), {s.train_tasks} "
        f"training tasks, {s.test_tasks} held-out tasks x {s.eval_samples} plans x "
        f"{s.eval_runs} runs; GRPO {s.steps} steps of {s.prompts_per_step} tasks x "
        f"{s.num_generations} samples; sub-agents: SmolLM2-135M-Instruct on llama.cpp"
    )


def _untrained(settings: RLRealSettings, test, executor: Executor, say) -> PolicyResult:
    """The policy without its LoRA on the first `untrained_tasks` held-out tasks, one plan
    a task: how many of its plans are valid before any training."""
    s = settings.sizes
    model, tokenizer = load_pretrained(settings.policy, lora_r=settings.lora_r, seed=settings.seed)
    with model.disable_adapter():
        shown = test[: s.untrained_tasks]
        return evaluate("untrained", model, tokenizer, shown, settings, executor, say, 1)


def _warm_up(
    settings: RLRealSettings, train, test, executor: Executor, say
) -> tuple[dict, PolicyResult]:
    """Stage 2 and its evaluation: the warm-up's summary and the warm-up policy's result."""
    warm = warmup(settings, train, say)
    adapter = Path(settings.out) / "warmup" / "adapter"
    model, tokenizer = load_pretrained(settings.policy, adapter=adapter)
    return warm, evaluate("warmup", model, tokenizer, test, settings, executor, say)


def _grpo_runs(
    settings: RLRealSettings, train, test, executor: Executor, rm_dir: Path, say
) -> tuple[dict[str, dict], dict[str, PolicyResult]]:
    """Stage 3 and its evaluation for each GRPO method asked for, in order, each from the
    warm-up: the runs' summaries (with the seconds spent executing) and the policies'
    results, by method."""
    from orchrm.scoring.load import load_scorer

    runs: dict[str, dict] = {}
    results: dict[str, PolicyResult] = {}
    scorer = None
    for method in settings.methods:
        if method == "warmup":
            continue
        if method == "orchrm" and scorer is None:
            scorer = load_scorer(rm_dir, None, device="cpu", batch_size=8)
        rewarder = Rewarder(method, PENALTIES[method], scorer, executor)
        executed = executor.seconds
        model, tokenizer, summary = grpo(settings, method, train, rewarder, say)
        summary["execution_s"] = round(executor.seconds - executed, 1)
        runs[method] = summary
        results[method] = evaluate(method, model, tokenizer, test, settings, executor, say)
        del model
    return runs, results


def _write_report(out: Path, report: dict, runs: dict[str, dict], say) -> None:
    """OUT/report.json, reward.png (with GRPO runs) and report.md; says the report."""
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if runs:
        plot_rewards(runs, out / "reward.png")
    (out / "report.md").write_text(report_text(report), encoding="utf-8")
    say(report_text(report))


def run(
    settings: RLRealSettings, say: Callable[[str], None] = print, backend: Serve = llama_clients
):
    """Every stage (module docstring); writes OUT/report.md, report.json and reward.png
    and returns the report's dictionary."""
    settings.check()
    # transformers' and peft's notices about their own calls, once per step or save
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
    warnings.filterwarnings("ignore", message=".*Could not find a config file.*")
    torch.set_num_threads(settings.threads or torch.get_num_threads())
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    real = settings.real_exec()
    split = draw_tasks(real, say)
    write_task_files(split, out)
    if settings.tasks_only:
        return tasks_only(real, split, say)
    if not settings.rm:
        check_validation(real, split["train"])
    train, test = split["train"], split["test"]
    bind_setup(out / "executions.jsonl", execution_setup(real))
    cache = ExecutionCache(out / "executions.jsonl")
    say(_opening(settings))
    with backend(real) as clients:
        executor = Executor(clients, cache, real, settings.progress)
        rm_dir = _reward_model(settings, executor, train, say)
        rm_seconds = round(time.perf_counter() - started, 1)
        untrained = _untrained(settings, test, executor, say)
        warm, warmed = _warm_up(settings, train, test, executor, say)
        runs, trained = _grpo_runs(settings, train, test, executor, rm_dir, say)
    results = {"warmup": warmed, **trained}
    seconds = time.perf_counter() - started
    report = build_report(settings, untrained, warm, results, runs, rm_dir, seconds)
    report["seconds"]["reward model"] = rm_seconds
    _write_report(out, report, runs, say)
    return report
