"""GRPO with the Orch-RM reward under each mitigation of reward hacking, on the world,
where the true success of every plan is known: the proxy reward and the true expected
accuracy on held-out tasks over training, against execution-reward GRPO, with training
tokens.

Every run starts from the same policy and trains the same steps on the same prompts
(`orchrm rl`'s pipeline, `orchrm.experiments.rl_world.pipeline`). The reward model is
an ensemble of `members` (`orchrm train --ensemble`, each member on a bootstrap draw of
the training tasks), trained once. The runs:

- `plain`: member 0 alone, the raw normalized score (one model, `--rm-members 1`);
- `kl`: the same reward, with a KL penalty `beta` to the starting policy (TRL's);
- `centred`: member 0, centred on the task's reference plans and bounded (PAR);
- `ensemble`: the ensemble's worst case (min over members; `orchrm rl`'s default with
  two members);
- `diverse`: the ensemble's worst case with a bonus for a structure the rest of the
  group does not write (`DIVERSITY`);
- `all`: the ensemble's worst case, centred, with the KL penalty;
- `execution`: every sampled plan executed on the world's sub-agents (the truth's
  noisy draw; no reward model).

Per run: the final held-out evaluation, the curve (true expected accuracy at
`curve_points` steps on `curve_tasks` tasks), its largest fall below the best point
before it, and its training tokens. OUT/mitigations.md and .json, OUT/mitigations.png.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.rl_world.compare import RunReport
from orchrm.experiments.rl_world.config import RLExperimentConfig
from orchrm.rl.config import GRPOConfig, PolicyConfig
from orchrm.training.config import SMALL_DATA_STEPS

RUNS = ("plain", "kl", "centred", "ensemble", "diverse", "all", "execution")
"""The runs the study knows, in the order of its table."""
DIVERSITY = 0.5
"""The `diverse` run's bonus weight for a structure alone in its group (in units of the
reward model's spread, the normalized reward's)."""


@config(frozen=True)
class MitigationSettings:
    """The study's options."""

    out: str = "runs/grpo-mitigations"
    """Folder of the world log, policy, reward models, each run and the report."""
    runs: tuple[str, ...] = RUNS
    """The runs, one per `--runs` (`plain`, `kl`, `centred`, `ensemble`, `all`,
    `execution`)."""
    steps: int = setting(150, min=1)
    """GRPO steps of every run (`orchrm rl`'s default)."""
    members: int = setting(4, min=2)
    """Reward models in the ensemble."""
    rm_steps: int = setting(SMALL_DATA_STEPS, min=1)
    """Training steps of each reward model (`orchrm demo`'s)."""
    beta: float = setting(0.04, min=0.0)
    """KL coefficient of the `kl` and `all` runs (TRL's GRPOTrainer default before it
    moved to 0)."""
    curve_points: int = setting(10, min=1)
    """Evaluations during training (plus the start and the end)."""
    curve_tasks: int = setting(100, min=1)
    """Held-out tasks of each curve point."""
    eval_tasks: int = setting(300, min=1)
    """Held-out tasks of the final evaluation."""
    train_tasks: int = setting(300, min=1)
    """Training tasks (world log, reward model, prompts)."""
    seed: int = 0
    """Seed of the world, the policy and training."""
    quick: bool = False
    """A small run: 20 steps, 2 reward models of 30 steps, 4 curve points on 30 tasks, 60
    held-out and 60 training tasks (checks the study, not the figures)."""


QUICK = {"steps": 20, "members": 2, "rm_steps": 30, "curve_points": 4, "curve_tasks": 30}
QUICK_TASKS = {"eval_tasks": 60, "train_tasks": 60}


def experiment(settings: MitigationSettings) -> RLExperimentConfig:
    """`orchrm rl`'s settings for the study's runs (GRPO with the Orch-RM reward, member
    0's settings; each run changes what it names)."""
    return RLExperimentConfig(
        out=settings.out,
        method="grpo",
        policy=PolicyConfig(steps=settings.steps, seed=settings.seed, progress=True),
        grpo=GRPOConfig(reward="orchrm"),
        rm_members=settings.members,
        rm_steps=settings.rm_steps,
        train_tasks=settings.train_tasks,
        eval_tasks=settings.eval_tasks,
        curve_points=settings.curve_points,
        curve_tasks=min(settings.curve_tasks, settings.eval_tasks),
    )


def run_config(base: RLExperimentConfig, name: str, beta: float) -> tuple[RLExperimentConfig, bool]:
    """The settings of run `name` and whether it reads the ensemble (else member 0)."""
    grpo = base.grpo
    if name == "execution":
        return replace(base, grpo=replace(grpo, reward="execution")), False
    changes = {
        "plain": {},
        "kl": {"beta": beta},
        "centred": {"centre": True},
        "ensemble": {"aggregate": "min"},
        "diverse": {"aggregate": "min", "diversity": DIVERSITY},
        "all": {"beta": beta, "centre": True, "aggregate": "min"},
    }
    if name not in changes:
        raise ConfigError(f"unknown run {name!r}: choose from {', '.join(RUNS)}")
    grpo = replace(grpo, **changes[name])
    return replace(base, grpo=grpo, tag=name), bool(grpo.aggregate)


def largest_fall(curve: list[float]) -> float:
    """The largest amount by which a point of `curve` lies below the best point before
    it (0 for a curve that never falls)."""
    best, fall = float("-inf"), 0.0
    for value in curve:
        best = max(best, value)
        fall = max(fall, best - value)
    return fall


def proxy_rewards(out: Path) -> list[tuple[int, float]]:
    """(step, mean reward of the step's samples) from a run's tokens.jsonl."""
    path = out / "tokens.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["step"], r["reward"]) for r in rows if "reward" in r]


def row(name: str, report: RunReport, execution_tokens: int | None) -> dict:
    """The table's row of one run."""
    curve = [p.expected for p in report.curve]
    tokens = report.training_tokens
    return {
        "run": name,
        "final": report.final.expected,
        "final_ci": list(report.final.expected_ci),
        "majority": report.final.majority,
        "best_point": max(curve),
        "last_point": curve[-1],
        "largest_fall": largest_fall(curve),
        "curve": [(p.step, p.expected) for p in report.curve],
        "training_tokens": tokens,
        "fewer_tokens_than_execution": (
            execution_tokens / tokens if execution_tokens and tokens else None
        ),
        "seconds": report.wall_s,
    }


def markdown(rows: list[dict], start: RunReport, settings: MitigationSettings) -> str:
    """The report's table."""
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    lines = [
        f"# GRPO on the world against reward hacking ({settings.steps} steps, seed "
        f"{settings.seed})",
        "",
        f"Start: expected accuracy {pct(start.final.expected)}% on {settings.eval_tasks} "
        f"held-out tasks. Curve: {settings.curve_points} points on {settings.curve_tasks} "
        "held-out tasks; fall: the largest drop below an earlier point of the curve.",
        "",
        "| run | expected % (95% CI) | majority % | best curve point % | last curve point % "
        "| largest fall, points | training tokens | execution's / this |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = r["fewer_tokens_than_execution"]
        lo, hi = r["final_ci"]
        lines.append(
            f"| {r['run']} | {pct(r['final'])} ({pct(lo)}-{pct(hi)}) | "
            f"{pct(r['majority']) if r['majority'] is not None else '-'} | "
            f"{pct(r['best_point'])} | {pct(r['last_point'])} | "
            f"{100 * r['largest_fall']:.1f} | {r['training_tokens']:,} | "
            f"{f'{ratio:.1f}x' if ratio else '-'} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], proxies: dict[str, list], path: Path) -> Path:
    """True expected accuracy over steps, from the start at step 0 (left), and each
    run's own reward (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in rows:
        steps, values = zip(*r["curve"], strict=True)
        left.plot(steps, [100 * v for v in values], marker="o", ms=3, label=r["run"])
        if proxies.get(r["run"]):
            s, v = zip(*proxies[r["run"]], strict=True)
            right.plot(s, v, lw=1, label=r["run"])
    left.set(xlabel="GRPO step", ylabel="true expected accuracy, held out (%)")
    right.set(xlabel="GRPO step", ylabel="mean reward of the step's samples (own scale)")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(settings: MitigationSettings) -> Path:
    """Train every run from one start; write OUT/mitigations.{md,json,png}."""
    from orchrm.experiments.rl_world.pipeline import prepare, train_run

    if settings.quick:
        settings = replace(settings, **QUICK, **QUICK_TASKS)
    unknown = [r for r in settings.runs if r not in RUNS]
    if unknown:
        raise ConfigError(f"unknown runs {unknown}: choose from {', '.join(RUNS)}")
    base = experiment(settings)
    prep = prepare(base, True)
    single = replace(prep, rm_dir=prep.rm_dir / "members" / "0")
    reports: dict[str, RunReport] = {}
    proxies: dict[str, list] = {}
    for name in settings.runs:
        config, ensemble = run_config(base, name, settings.beta)
        reports[name] = train_run(config, prep if ensemble else single)
        proxies[name] = proxy_rewards(Path(settings.out) / config.run_name)
    execution = reports.get("execution")
    execution_tokens = execution.training_tokens if execution else None
    rows = [row(name, reports[name], execution_tokens) for name in settings.runs]
    out = Path(settings.out)
    text = markdown(rows, prep.start, settings)
    (out / "mitigations.md").write_text(text, encoding="utf-8")
    payload = {"settings": asdict(settings), "start": prep.start.final.expected, "runs": rows}
    (out / "mitigations.json").write_text(json.dumps(payload, indent=1))
    plot(rows, proxies, out / "mitigations.png")
    print(text)
    return out / "mitigations.md"
