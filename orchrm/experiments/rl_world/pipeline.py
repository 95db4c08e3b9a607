"""`orchrm rl`: prepare, train one method (or several), evaluate, report.

    orchrm rl --rm runs/rm/model --out runs/rl                  # Orch-RM-reward GRPO
    orchrm rl --reward execution --out runs/rl                  # execution-reward GRPO
    orchrm rl --compare --out runs/rl                           # start vs every method

`prepare` builds (or reuses, from OUT) the world log, the default policy and the reward
model, and evaluates the starting policy once. `train_run` trains one method from the
starting policy into OUT/<run> (checkpoints, `tokens.jsonl`, `eval.json`, `model/`) with
a training curve on held-out tasks; `run` and `compare` write OUT/report.md, report.json
and curve.png.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from orchrm.errors import ConfigError, InputError
from orchrm.experiments.rl_world import data
from orchrm.experiments.rl_world.compare import RunReport, write_report
from orchrm.experiments.rl_world.config import RUNS, RLExperimentConfig
from orchrm.experiments.rl_world.evaluate import (
    PolicyEval,
    curve_callback,
    curve_scalars,
    evaluate_policy,
)
from orchrm.experiments.stages import WorldLog
from orchrm.rl.policy import load_policy, load_policy_tokenizer
from orchrm.rl.rewards import ExecutionReward, OrchRMReward, TokenLedger
from orchrm.training.tracking import Tracker
from orchrm.world.backend import WorldBackend
from orchrm.world.generate import world_config
from orchrm.world.tasks import WorldTask


@dataclass
class Prepared:
    """What every run starts from."""

    logs: WorldLog
    policy_dir: Path
    rm_dir: Path | None
    train: list[WorldTask]
    rows: list[dict]
    held_out: list[WorldTask]
    start: RunReport


def _eval_from_dict(d: dict) -> PolicyEval:
    return PolicyEval(**d)


def prepare(config: RLExperimentConfig, need_rm: bool, say=print) -> Prepared:
    """The world log, the starting policy, the reward model (when a run needs one), the
    training prompts and held-out tasks, and the starting policy's evaluation (cached in
    OUT/start.json for the same policy and evaluation settings)."""
    torch.set_num_threads(config.num_threads)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    logs = data.world_logs(config, say)
    policy = config.policy.model
    policy_dir = Path(policy) if policy else data.build_policy(config, logs, say)
    rm_dir = None
    if need_rm:
        rm_dir = Path(config.rm) if config.rm else data.build_rm(config, logs, say)
    train = data.train_tasks(config)
    held_out = data.eval_tasks(config)
    key = {
        "policy": str(policy_dir.resolve()),
        "mtime": (policy_dir / "model.safetensors").stat().st_mtime
        if (policy_dir / "model.safetensors").exists()
        else 0,
        "preset": config.preset,
        "tasks": config.eval_tasks,
        "samples": config.eval_samples,
        "max_completion_length": config.policy.max_completion_length,
        "curve_tasks": config.curve_tasks,
        "seed": config.seed,
    }
    cache = out / "start.json"
    if cache.exists() and json.loads(cache.read_text()).get("key") == key:
        saved = json.loads(cache.read_text())
        final, point = _eval_from_dict(saved["final"]), _eval_from_dict(saved["curve"])
    else:
        model, tokenizer = load_policy(policy_dir)
        final = evaluate_policy(model, tokenizer, held_out, config)
        point = evaluate_policy(
            model, tokenizer, held_out[: config.curve_tasks], config, majority=False
        )
        cache.write_text(json.dumps({"key": key, "final": asdict(final), "curve": asdict(point)}))
    say(
        f"starting policy: expected accuracy {100 * final.expected:.1f}% "
        f"(valid {100 * final.valid:.0f}%) on {len(held_out)} held-out tasks"
    )
    start = RunReport("start (SFT on base)", final, [point])
    return Prepared(logs, policy_dir, rm_dir, train, data.prompt_rows(train), held_out, start)


def _train_method(
    config: RLExperimentConfig, prep: Prepared, out: Path, *, ledger: TokenLedger, callback
):
    """Train with `config.method` (and `config.grpo.reward` for GRPO) from the starting
    policy; returns (model, tokenizer, tokens spent on the training data, notes for the
    report)."""
    policy = config.trainer_policy(str(prep.policy_dir))
    data_tokens, notes = 0, {}
    if config.method == "grpo":
        from orchrm.rl.grpo import train_grpo

        grpo, rows = config.grpo, prep.rows
        if grpo.reward == "orchrm":
            from orchrm.scoring.load import load_scorer

            # Forward passes of 8: on a CPU, padding a bigger batch to its longest text costs
            # more than batching saves (docs/results.md#why-the-defaults).
            rm = load_scorer(
                prep.rm_dir,
                config.rm_url or None,
                device="cpu",
                batch_size=8,
                aggregate=grpo.aggregate or None,
            )
            reward = OrchRMReward.for_grpo(rm, grpo, ledger)
            if grpo.centre:
                rows = data.with_references(prep.rows, prep.logs, config.reference_plans)
            data_tokens = prep.logs.execution_tokens if not config.rm else 0
            notes["reward model"] = str(prep.rm_dir)
        else:
            run_config = world_config()
            backend = WorldBackend(prep.train, config.seed, None, run_config)
            reward = ExecutionReward(backend, run_config, grpo.reward_penalty, ledger)
        model, tokenizer, _ = train_grpo(policy, grpo, reward, rows, out, [callback])
    elif config.method == "rft":
        from orchrm.rl.rft import train_rft

        run_config = world_config()
        backend = WorldBackend(prep.train, config.seed, None, run_config)

        def after_round(model, step: int) -> None:
            callback.on_step_end(None, _State(step), None, model=model)

        model, tokenizer = train_rft(
            policy, config.rft, prep.rows, backend, run_config, ledger, out, after_round
        )
    else:
        from orchrm.rl.dpo import train_dpo

        rows = data.dpo_rows(config, prep.logs)
        data_tokens = prep.logs.execution_tokens
        notes["pairs"] = len(rows)
        model, tokenizer, _ = train_dpo(policy, config.dpo, rows, out, [callback])
    return model, tokenizer, data_tokens, notes


def train_run(config: RLExperimentConfig, prep: Prepared, say=print) -> RunReport:
    """Train `config.method` (with `config.grpo.reward` for GRPO) from the starting policy and
    evaluate it; writes OUT/<run>/{tokens.jsonl, eval.json, model/, checkpoints/}."""
    config.check()
    torch.set_num_threads(config.num_threads)
    out = Path(config.out) / config.run_name
    out.mkdir(parents=True, exist_ok=True)
    ledger = TokenLedger(out / "tokens.jsonl")
    curve_tasks = prep.held_out[: config.curve_tasks]
    steps = config.policy.steps
    at = {steps * k // config.curve_points for k in range(1, config.curve_points + 1)}
    tokenizer = load_policy(prep.policy_dir)[1]
    tracker = Tracker(config.policy.report_to, out, "curve", asdict(config))
    tracker.log(curve_scalars(prep.start.curve[0]), 0)
    callback = curve_callback(tokenizer, curve_tasks, config, at, say, tracker)
    say(f"{config.run_name}: {steps} steps")
    start = time.perf_counter()
    try:
        model, tokenizer, data_tokens, notes = _train_method(
            config, prep, out, ledger=ledger, callback=callback
        )
        curve_s = sum(p.seconds for p in callback.points)
        wall = time.perf_counter() - start - curve_s
        final = evaluate_policy(model, tokenizer, prep.held_out, config, step=steps)
        tracker.log(curve_scalars(final, "final"), steps)
    finally:
        tracker.close()
    report = RunReport(
        config.run_name,
        final,
        [prep.start.curve[0], *callback.points],
        dict(ledger.totals),
        data_tokens,
        wall,
        steps,
        notes,
    )
    (out / "eval.json").write_text(json.dumps(asdict(report), indent=2))
    say(
        f"{config.run_name}: expected accuracy {100 * final.expected:.1f}% "
        f"({100 * final.expected_ci[0]:.1f}-{100 * final.expected_ci[1]:.1f}), "
        f"{report.training_tokens:,} training tokens, {wall:.0f} s"
    )
    return report


@dataclass
class _State:
    """The one field of a TrainerState the curve callback reads (RFT has no trainer)."""

    global_step: int


def run(config: RLExperimentConfig, say=print) -> Path:
    """Train one method and report it against the starting policy."""
    config.check()
    started = time.perf_counter()
    prep = prepare(config, config.needs_rm, say)
    report = train_run(config, prep, say)
    seconds = time.perf_counter() - started
    return write_report(
        [prep.start, report],
        Path(config.out) / config.run_name,
        f"world {config.preset}",
        {"seconds": round(seconds), "config": _config_dict(config)},
    )


def compare(config: RLExperimentConfig, runs: list[str] | None = None, say=print) -> Path:
    """Train each named run (`RUNS`) from the same starting policy, same steps, and
    report them side by side in OUT."""
    runs = runs or list(RUNS)
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        raise ConfigError(f"unknown runs {unknown}: choose from {', '.join(RUNS)}")
    started = time.perf_counter()
    prep = prepare(config, any(config.for_run(r).needs_rm for r in runs), say)
    reports = [prep.start]
    for name in runs:
        reports.append(train_run(config.for_run(name), prep, say))
    seconds = time.perf_counter() - started
    extra = {"seconds": round(seconds), "config": _config_dict(config)}
    by_name = {r.name: r for r in reports}
    if "grpo-orchrm" in by_name and "grpo-execution" in by_name:
        rm_run, ex_run = by_name["grpo-orchrm"], by_name["grpo-execution"]
        extra["execution / orchrm training tokens"] = (
            f"{ex_run.training_tokens / max(1, rm_run.training_tokens):.1f}x"
        )
    return write_report(reports, config.out, f"world {config.preset}", extra)


def load_task_file(spec: str) -> list:
    """The tasks of `RLExperimentConfig.tasks`: `NAME:PATH` for a benchmark file, else a JSONL file
    of questions."""
    from orchrm.tasks.benchmarks.registry import BENCHMARKS, load_benchmark
    from orchrm.tasks.task import load_tasks

    name, sep, path = spec.partition(":")
    tasks = load_benchmark(name, path) if sep and name in BENCHMARKS else load_tasks(spec)
    if not tasks:
        raise InputError(f"{spec}: no tasks")
    return tasks


def _chat_prompt(config: RLExperimentConfig, model: str) -> bool:
    """Whether the policy reads the chat prompt: `config.chat`, else whether `model`'s
    tokenizer has a chat template."""
    if config.chat is not None:
        return config.chat
    try:
        return load_policy_tokenizer(model).chat_template is not None
    except OSError as err:
        raise ConfigError(f"--policy {model}: {err}") from None


def _tasks_scorer(config: RLExperimentConfig):
    """The reward model GRPO on your own tasks scores with (`config.rm`, or the server at
    `config.rm_url`): on the GPU when there is one, in batches of 64, else on the CPU's
    `config.num_threads` threads in batches of 8."""
    from orchrm.scoring.load import load_scorer

    cuda = torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(config.num_threads)
    return load_scorer(
        config.rm or None,
        config.rm_url or None,
        device="cuda" if cuda else "cpu",
        batch_size=64 if cuda else 8,
    )


def grpo_on_tasks(config: RLExperimentConfig, say=print) -> Path:
    """Orch-RM-reward GRPO of `config.policy.model` on your own tasks (`config.tasks`): no
    world, no execution; writes OUT/grpo-orchrm/{model/, checkpoints/, tokens.jsonl,
    report.md, report.json}. The report has the reward and the share of valid plans over
    training and the token totals; the policy is evaluated with `orchrm run` + `eval`."""
    from orchrm.rl.grpo import train_grpo

    config.check()
    policy = config.trainer_policy(config.policy.model)
    if not policy.model:
        raise ConfigError("training on --tasks needs a starting policy (--policy DIR or name)")
    started = time.perf_counter()
    tasks = load_task_file(config.tasks)
    chat = _chat_prompt(config, policy.model)
    rows = data.prompt_rows(tasks, chat=chat)
    out = Path(config.out) / config.run_name
    out.mkdir(parents=True, exist_ok=True)
    rm = _tasks_scorer(config)
    ledger = TokenLedger(out / "tokens.jsonl")
    grpo = config.grpo
    say(f"{config.run_name}: {len(tasks)} tasks from {config.tasks}, {policy.steps} steps")
    reward = OrchRMReward.for_grpo(rm, grpo, ledger)
    train_grpo(policy, grpo, reward, rows, out)
    seconds = time.perf_counter() - started
    return _write_tasks_report(config, policy.model, len(tasks), chat, seconds, ledger, out)


def _write_tasks_report(
    config: RLExperimentConfig,
    model: str,
    tasks: int,
    chat: bool,
    seconds: float,
    ledger: TokenLedger,
    out: Path,
) -> Path:
    """OUT/report.md and report.json of GRPO on your own tasks: the settings, the mean
    reward and valid share over each tenth of the steps (`_tenths`) and the training
    tokens."""
    grpo = config.grpo
    lines = [
        f"# orchrm rl: {config.run_name} on {config.tasks}\n",
        f"{tasks} tasks, policy {model}, reward model {config.rm}, "
        f"{'chat' if chat else 'compact'} prompt, LoRA r={grpo.lora_r or 'none'}, "
        f"{round(seconds)} s.\n",
        "| steps | mean reward | valid % |",
        "| --- | ---: | ---: |",
    ]
    rows_by_tenth = _tenths(ledger.rows)
    for first, last, reward, valid in rows_by_tenth:
        lines.append(f"| {first}-{last} | {reward:.3f} | {100 * valid:.1f} |")
    totals = dict(ledger.totals)
    lines.append(
        f"\ntraining tokens: policy {totals['policy']:,}, reward model {totals['rm']:,}, "
        f"sub-agents {totals['execution']:,}"
    )
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    payload = {
        "tasks": tasks,
        "chat": chat,
        "seconds": round(seconds),
        "tokens": totals,
        "curve": [
            {"first_step": f, "last_step": la, "reward": r, "valid": v}
            for f, la, r, v in rows_by_tenth
        ],
        "config": _config_dict(config),
    }
    (out / "report.json").write_text(json.dumps(payload, indent=2))
    return out / "report.md"


def _tenths(rows: list[dict]) -> list[tuple[int, int, float, float]]:
    """Mean reward and valid share over each tenth of the ledger's rows."""
    chunks = []
    size = max(1, len(rows) // 10)
    for i in range(0, len(rows), size):
        part = rows[i : i + size]
        chunks.append(
            (
                part[0]["step"],
                part[-1]["step"],
                sum(r.get("reward", 0.0) for r in part) / len(part),
                sum(r.get("valid", 0.0) for r in part) / len(part),
            )
        )
    return chunks


def _config_dict(config: RLExperimentConfig) -> dict:
    return asdict(config)
