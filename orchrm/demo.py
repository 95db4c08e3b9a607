"""`orchrm demo`: the whole story offline, on the controlled world.

For the `math` and `multihop` presets: generate logs for training tasks and held-out
test tasks, ingest the training logs, mine pairs, train the default MiniLM reward model
per domain and one on both domains mixed, then evaluate best-of-8 on the held-out tasks
against every selector (the other domain's reward model serves as `external-rm`), and
write the report (Markdown, PNGs, JSON) to the output folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from orchrm.bestofn.lineup import evaluate_tasks, selectors, world_judge
from orchrm.bestofn.metrics import tasks_from_logs
from orchrm.bestofn.report import markdown, points, write_report
from orchrm.bestofn.reruns import with_reruns
from orchrm.bestofn.selectors import RewardModelSelector
from orchrm.jsonl import write_jsonl
from orchrm.rm.config import SMALL_DATA_LR, SMALL_DATA_STEPS, TrainConfig
from orchrm.rm.model import OrchRM, backbone_budget
from orchrm.rm.train import train
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, export, mine
from orchrm.world.generate import generate

PRESETS = ("math", "multihop")


@dataclass
class DemoConfig:
    """Sizes of the demo; docs/results.md#the-demo says how long the defaults take."""

    out: str = "orchrm-demo"
    """Folder for logs, store, pairs, models and the report."""
    train_tasks: int = 300
    """World tasks per preset whose logs train the reward models: at the same steps, more
    tasks mean more distinct pairs (docs/results.md#training-tasks-and-steps)."""
    test_tasks: int = 100
    """Held-out world tasks per preset (another seed) for best-of-N."""
    samples: int = 8
    """Orchestrations per task and orchestrator (N of best-of-N)."""
    steps: int = SMALL_DATA_STEPS
    """Training steps (batch 16) of the math and the mixed reward model."""
    multihop_steps: int = 45
    """Training steps of the multihop reward model: its pairs carry little to learn (the
    orchestration matters little there), and fewer steps keep the demo near 15 minutes
    on two CPU cores without bf16."""
    bf16: bool | None = None
    """Train and score in bfloat16; None: where the hardware runs it fast (see
    `TrainConfig.bf16`)."""
    lr: float = SMALL_DATA_LR
    """Learning rate of the three reward models."""
    max_length: int = 128
    """Reward-model tokens per text."""
    seed: int = 0
    """Seeds the world, the pair splits and training."""
    reruns: int = 20
    """Re-executions of every held-out candidate, from which majority and the weighted
    vote get an expected accuracy (`orchrm.bestofn.reruns`); 0: none."""


def _gap_share(at: dict, measure: str) -> str:
    """(orchrm - majority) / (bayes - majority) on `measure` (`expected_accuracy` or
    `accuracy`), when all three have one and the gap is not 0."""
    values = [getattr(at[k], measure) for k in ("orchrm", "majority", "bayes")]
    if any(v is None for v in values) or values[2] == values[1]:
        return "n/a"
    orchrm, majority, bayes = values
    return (
        f"{(orchrm - majority) / (bayes - majority):.2f} (orchrm {100 * orchrm:.1f}, "
        f"majority {100 * majority:.1f}, bayes {100 * bayes:.1f})"
    )


def _versus_majority(r) -> str:
    """Orch-RM minus majority task by task, in points, with the paired intervals."""
    parts = []
    if r.expected_vs_baseline is not None:
        parts.append("expected " + points(r.expected_vs_baseline, r.expected_vs_baseline_ci))
    if r.vs_baseline is not None:
        parts.append("sampled " + points(r.vs_baseline, r.vs_baseline_ci))
    return "; ".join(parts) + " (points, paired 95% CIs)" if parts else "n/a"


def run_demo(config: DemoConfig, say=print) -> dict:
    """Run the pipeline; returns the report's numbers (also in OUT/report.json)."""
    out = Path(config.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    mark = started

    def lap(stage: str) -> None:
        """Record the seconds `stage` took since the last lap."""
        nonlocal mark
        now = time.perf_counter()
        seconds[stage], mark = round(now - mark, 1), now

    logs: dict[tuple[str, str], Path] = {}
    world: dict[tuple[str, str], list] = {}
    for preset in PRESETS:
        for part, n, seed in (
            ("train", config.train_tasks, config.seed),
            ("test", config.test_tasks, config.seed + 1),
        ):
            generated = generate(preset, n, config.samples, seed)
            world[(preset, part)] = generated.tasks
            logs[(preset, part)] = out / "logs" / f"{preset}.{part}.jsonl"
            write_jsonl(generated.records, logs[(preset, part)])
            write_jsonl(
                [t.to_dict() for t in generated.tasks],
                out / "logs" / f"{preset}.{part}.tasks.jsonl",
            )
            say(
                f"{preset} {part}: {len(generated.records)} records "
                f"({generated.executions_per_s:.0f} executed orchestrations/s)"
            )
    lap("generate")
    store_path = out / "orchrm.duckdb"
    store_path.unlink(missing_ok=True)
    models, held_out, truncated = {}, {}, {}
    # Pairs are cut to the reward model's own token budget, as scoring cuts them.
    budget = backbone_budget("", config.max_length)
    with Store(store_path) as store:
        for preset in PRESETS:
            ingest_file(store, logs[(preset, "train")])
        for dataset, domain in (("math", "math"), ("multihop", "multihop"), ("mixed", None)):
            mined = mine(
                store,
                MineConfig(
                    dataset=dataset,
                    domain=domain,
                    seed=config.seed,
                    specialized=("specialized",),
                    base=("base",),
                    split=(0.85, 0.15, 0.0),
                ),
            )
            export(store, out / "pairs" / dataset, dataset, "jsonl", *budget)
            say(f"pairs {dataset}: {mined.kept} ({mined.by_split})")
    lap("ingest and mine")
    for dataset in ("math", "multihop", "mixed"):
        steps = config.multihop_steps if dataset == "multihop" else config.steps
        summary = train(
            TrainConfig(
                pairs=str(out / "pairs" / dataset),
                out=str(out / "rm" / dataset),
                max_steps=steps,
                max_length=config.max_length,
                lr=config.lr,
                bf16=config.bf16,
                # Validate once, at the end: in the default demo the last step beat the
                # halfway one for all three models, and that pass cost about a minute
                # without AMX.
                eval_every=steps,
                seed=config.seed,
            )
        )
        models[dataset] = OrchRM.load(out / "rm" / dataset / "model", bf16=config.bf16)
        held_out[dataset] = summary.best_validation_accuracy
        truncated[dataset] = summary.truncated_texts
        lap(f"train {dataset}")
        say(
            f"reward model {dataset}: validation pairwise accuracy "
            f"{summary.best_validation_accuracy:.3f} ({summary.pairs_per_second:.1f} "
            f"pairs/s; {summary.truncated_texts} of "
            f"{2 * (summary.train_pairs + summary.validation_pairs)} texts over "
            f"{config.max_length} tokens)"
        )
    evaluations = []
    for preset in PRESETS:
        other = "multihop" if preset == "math" else "math"
        chosen = selectors(
            rm=models[preset],
            external_rm=models[other],
            judge=world_judge([out / "logs" / f"{preset}.test.tasks.jsonl"]),
            world=True,
            seed=config.seed,
        )
        chosen["orchrm-mixed"] = RewardModelSelector(models["mixed"])
        tasks = tasks_from_logs([str(logs[(preset, "test")])], "specialized", config.samples)
        tasks = with_reruns(tasks, world[(preset, "test")], config.reruns)
        ev = evaluate_tasks(tasks, chosen, config.samples, domain=preset)
        at = ev.at(ev.n)
        cheaper = at["judge-traj"].verification_tokens / max(1.0, at["orchrm"].verification_tokens)
        ev.notes = {
            "share of the majority -> bayes gap Orch-RM closes, on expected accuracy": (
                _gap_share(at, "expected_accuracy")
            ),
            "the same on sampled accuracy (one execution per pick: noisier)": _gap_share(
                at, "accuracy"
            ),
            "orchrm - majority, task by task": _versus_majority(at["orchrm"]),
            "judge-traj / orchrm verification tokens": f"{cheaper:.1f}x",
            "external-rm": f"the reward model trained on {other}",
            "world judges": "orchestration level: true success probability + N(0, 0.3) noise; "
            "trajectory level: reads each answer's correctness right 85% of "
            "the time",
        }
        evaluations.append(ev)
        lap(f"evaluate {preset}")
    seconds["total"] = round(time.perf_counter() - started, 1)
    report = write_report(
        evaluations,
        out,
        {
            "validation_accuracy": held_out,
            "truncated_texts": truncated,
            "seconds": seconds,
        },
    )
    for ev in evaluations:
        say(markdown(ev))
    say("seconds: " + ", ".join(f"{stage} {s:.0f}" for stage, s in seconds.items()))
    say(f"report: {report} ({time.perf_counter() - started:.0f} s)")
    return {"evaluations": [ev.to_dict() for ev in evaluations], "validation": held_out}
