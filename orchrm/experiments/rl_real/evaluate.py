"""The SmolLM2 GRPO comparison's evaluation and report (`orchrm.experiments.rl_real.run`):
each policy's plans for the held-out tasks executed on llama.cpp, paired intervals
between policies, report.md and the reward figure."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from orchrm.evaluation.metrics import Bootstrap
from orchrm.experiments.real_exec.cache import Execution, parsed_plan
from orchrm.experiments.real_exec.evaluate import run_seed
from orchrm.experiments.rl_real.config import (
    EVAL_DRAW,
    Executor,
    RLRealSettings,
    plan_shape,
    runnable_plan,
)
from orchrm.rl.pretrained import prompt_ids, sample_groups
from orchrm.tasks.benchmarks.generated import GeneratedTask


@dataclass
class PolicyResult:
    """A policy's plans on the held-out tasks, executed."""

    name: str
    per_task: list[float]
    """Expected accuracy of each task (mean over its plans and runs)."""
    valid: float
    parsed: float
    mean_tokens: float
    by_kind: dict[str, float]
    shapes: dict[str, dict[str, int]]
    """Plan structures chosen, per task kind."""
    seconds: float
    expected: float = 0.0
    ci: tuple[float, float] = (0.0, 0.0)
    examples: list[str] = field(default_factory=list)


def _sample_plans(
    model, tokenizer, tasks: list[GeneratedTask], settings: RLRealSettings, samples: int
) -> list[list]:
    """`samples` plans a task, sampled eight prompts at a time with the evaluation's seed
    (`seed` + 1)."""
    s = settings.sizes
    generator = torch.Generator().manual_seed(settings.seed + 1)
    ids = [prompt_ids(tokenizer, t.task.question) for t in tasks]
    groups = []
    for i in range(0, len(ids), 8):
        groups += sample_groups(
            model,
            tokenizer,
            ids[i : i + 8],
            samples,
            s.max_new_tokens,
            temperature=settings.temperature,
            generator=generator,
        )
    return groups


def _plan_runs(
    tasks: list[GeneratedTask], groups: list[list], plans: list[list], runs: int
) -> dict[tuple[str, int], list[Execution]]:
    """The `runs` seeded executions of each valid plan, by (task id, sample)."""
    executions = {}
    for t, group, row in zip(tasks, groups, plans, strict=True):
        for k, (x, o) in enumerate(zip(group, row, strict=True)):
            if o is not None:
                executions[(t.task.id, k)] = [
                    Execution(t.task, k, x.text, run_seed(EVAL_DRAW, r), o) for r in range(runs)
                ]
    return executions


def _task_scores(
    tasks: list[GeneratedTask],
    plans: list[list],
    runs: dict[tuple[str, int], list[Execution]],
    executor: Executor | None,
    eval_runs: int,
) -> tuple[list[float], dict[str, list[float]], dict[str, Counter]]:
    """Each task's expected accuracy (the mean success over its plans' runs, an invalid
    plan's runs 0, every plan 0 without an executor), the tasks' accuracies by kind, and
    the plan structures chosen by kind."""
    per_task, kinds, shapes = [], {}, {}
    for t, row in zip(tasks, plans, strict=True):
        scores = []
        for k, o in enumerate(row):
            if o is None or executor is None:
                scores += [0.0] * eval_runs
                continue
            shapes.setdefault(t.kind, Counter())[plan_shape(o)] += 1
            scores += [float(executor.outcome(e, t)[0]) for e in runs[(t.task.id, k)]]
        per_task.append(statistics.fmean(scores))
        kinds.setdefault(t.kind, []).append(per_task[-1])
    return per_task, kinds, shapes


def evaluate(
    name: str,
    model,
    tokenizer,
    tasks: list[GeneratedTask],
    settings: RLRealSettings,
    executor: Executor | None,
    say,
    samples: int = 0,
) -> PolicyResult:
    """Stage 4 for one policy: `eval_samples` plans a held-out task, sampled with the
    evaluation's seed; each valid one executed `eval_runs` times (none when `executor`
    is None: validity only)."""
    s = settings.sizes
    started = time.perf_counter()
    groups = _sample_plans(model, tokenizer, tasks, settings, samples or s.eval_samples)
    plans = [[runnable_plan(x.text) for x in g] for g in groups]
    runs = _plan_runs(tasks, groups, plans, s.eval_runs)
    if executor is not None:
        executor.run([e for es in runs.values() for e in es], f"executing {name}'s plans")
    per_task, kinds, shapes = _task_scores(tasks, plans, runs, executor, s.eval_runs)
    flat = [x for g in groups for x in g]
    result = PolicyResult(
        name=name,
        per_task=per_task,
        valid=statistics.fmean(o is not None for row in plans for o in row),
        parsed=statistics.fmean(not isinstance(parsed_plan(x.text), Exception) for x in flat),
        mean_tokens=statistics.fmean(x.tokens for x in flat),
        by_kind={k: statistics.fmean(v) for k, v in sorted(kinds.items())},
        shapes={k: dict(v.most_common()) for k, v in sorted(shapes.items())},
        seconds=round(time.perf_counter() - started, 1),
        examples=[flat[0].text] if flat else [],
    )
    result.expected = statistics.fmean(per_task)
    result.ci = Bootstrap(seed=settings.seed).mean(per_task)
    say(
        f"{name}: expected accuracy {100 * result.expected:.1f}% "
        f"({100 * result.ci[0]:.1f}-{100 * result.ci[1]:.1f}), valid {100 * result.valid:.0f}%, "
        f"{result.seconds:.0f} s"
    )
    return result


def versus(a: PolicyResult, b: PolicyResult, seed: int) -> dict:
    diff = statistics.fmean(a.per_task) - statistics.fmean(b.per_task)
    low, high = Bootstrap(seed=seed).difference(a.per_task, b.per_task)
    return {"difference": diff, "ci": [low, high]}


def build_report(settings, untrained, warm, results, runs, rm_dir, seconds) -> dict:
    methods = {}
    for name, r in results.items():
        run = runs.get(name, {})
        tokens = run.get("tokens", {"policy": 0, "rm": 0, "execution": 0})
        methods[name] = {
            **asdict(r),
            "training_tokens": tokens,
            "training_tokens_total": sum(tokens.values()),
            "train_seconds": run.get("seconds", 0.0),
            "train_seconds_by_part": run.get("seconds_by_part", {}),
            "versus_warmup": versus(r, results["warmup"], settings.seed)
            if name != "warmup"
            else None,
        }
    pairs = {}
    if "orchrm" in results and "execution" in results:
        pairs["orchrm - execution"] = versus(results["orchrm"], results["execution"], settings.seed)
        ex = methods["execution"]["training_tokens_total"]
        rm = max(1, methods["orchrm"]["training_tokens_total"])
        pairs["execution / orchrm training tokens"] = ex / rm
    return {
        "settings": asdict(settings) | {"sizes": asdict(settings.sizes)},
        "reward_model": str(rm_dir),
        "untrained": asdict(untrained),
        "warmup": {k: v for k, v in warm.items() if k != "losses"},
        "methods": methods,
        "pairs": pairs,
        "curves": {m: run["steps"] for m, run in runs.items()},
        "seconds": {"total": round(seconds, 1)},
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def report_text(report: dict) -> str:
    """report.md from the report's dictionary."""
    s = report["settings"]["sizes"]
    w, u = report["warmup"], report["untrained"]
    lines = [
        "# GRPO of SmolLM2-135M-Instruct as the orchestrator, plans executed on llama.cpp\n",
        f"Held-out: {s['test_tasks']} tasks x {s['eval_samples']} plans x {s['eval_runs']} "
        f"seeded executions. GRPO: {s['steps']} steps of {s['prompts_per_step']} tasks x "
        f"{s['num_generations']} samples from the same warm-up.\n",
        f"- untrained: {_pct(u['valid'])}% of sampled plans valid ({_pct(u['parsed'])}% parse)",
        f"- warm-up: {w['steps']} supervised steps on {w['examples']} base template plans, "
        f"loss {w['loss_first']:.3f} -> {w['loss_last']:.3f}, {w['seconds']:.0f} s, "
        f"{w['tokens']:,} tokens read; valid plans "
        f"{_pct(report['methods']['warmup']['valid'])}%\n",
        "| method | expected accuracy % (95% CI) | vs warm-up, points (paired 95% CI) | valid % "
        "| training tokens: policy / RM / execution | training s |",
        "| --- | --- | --- | ---: | --- | ---: |",
    ]
    for name, m in report["methods"].items():
        v = m["versus_warmup"]
        vs = (
            f"{100 * v['difference']:+.1f} ({100 * v['ci'][0]:+.1f} to {100 * v['ci'][1]:+.1f})"
            if v
            else ""
        )
        t = m["training_tokens"]
        lines.append(
            f"| {name} | {_pct(m['expected'])} ({_pct(m['ci'][0])}-{_pct(m['ci'][1])}) | {vs} | "
            f"{_pct(m['valid'])} | {t['policy']:,} / {t['rm']:,} / {t['execution']:,} | "
            f"{m['train_seconds']:.0f} |"
        )
    pairs = report["pairs"]
    if pairs:
        d = pairs["orchrm - execution"]
        lines.append(
            f"\nOrch-RM reward - execution reward: {100 * d['difference']:+.1f} points "
            f"({100 * d['ci'][0]:+.1f} to {100 * d['ci'][1]:+.1f}); execution-reward GRPO "
            f"spent {pairs['execution / orchrm training tokens']:.1f}x the training tokens."
        )
    kinds = sorted({k for m in report["methods"].values() for k in m["by_kind"]})
    lines += ["\n| task kind | " + " | ".join(report["methods"]) + " |"]
    lines.append("| --- |" + " ---: |" * len(report["methods"]))
    for k in kinds:
        cells = [_pct(m["by_kind"].get(k, 0.0)) for m in report["methods"].values()]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append("\nPlan structures chosen (valid plans), by task kind:\n")
    for name, m in report["methods"].items():
        for k, shapes in m["shapes"].items():
            top = ", ".join(f"{shape} {n}" for shape, n in list(shapes.items())[:3])
            lines.append(f"- {name}, {k}: {top}")
    lines.append(f"\nWall time: {report['seconds']['total']:.0f} s.")
    return "\n".join(lines) + "\n"


def plot_rewards(runs: dict[str, dict], path: Path) -> Path:
    """The mean reward and the valid share of each step, one panel each, per GRPO run."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6), layout="constrained")
    reward_ax, valid_ax = fig.subplots(1, 2)
    for method, run in runs.items():
        steps = [r["step"] for r in run["steps"]]
        reward_ax.plot(steps, [r["reward"] for r in run["steps"]], marker=".", label=method)
        valid_ax.plot(steps, [r["valid"] for r in run["steps"]], marker=".", label=method)
    reward_ax.set_title("mean reward of the step's samples")
    reward_ax.set_xlabel("GRPO step")
    valid_ax.set_title("share of valid plans")
    valid_ax.set_xlabel("GRPO step")
    valid_ax.set_ylim(0, 1.02)
    reward_ax.legend()
    fig.savefig(path, dpi=120)
    return path
