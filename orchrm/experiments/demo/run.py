"""`orchrm demo`: the whole story offline, on the controlled world, strung from the
stages of `orchrm.experiments.stages`.

For each preset asked for (`math` by default): generate logs for training tasks and
held-out test tasks, ingest the training logs, mine pairs, train the default MiniLM reward
model per domain (and, with `mixed`, one on every domain's pairs mixed), then evaluate
best-of-8 on the held-out tasks against every selector (with two presets or more, another
domain's reward model serves as `external-rm`), and write the report (Markdown, PNGs,
JSON) to the output folder. Run again into the same folder, each stage whose inputs are
unchanged is reused: OUT/logs, OUT/pairs, OUT/rm/NAME and OUT/eval/PRESET hold their
manifests.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from orchrm.evaluation.report import points, terminal_table, write_report
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.stages import WorldLog, best_of_n, world_log
from orchrm.experiments.world_models import (
    PairDataset,
    WorldRMConfig,
    WorldRMResult,
    world_reward_models,
)
from orchrm.training.config import TrainConfig


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


def _generate_logs(config: DemoConfig, say) -> dict[tuple[str, str], WorldLog]:
    """Training and held-out logs (and their task files) of each preset into OUT/logs,
    by (preset, part)."""
    logs: dict[tuple[str, str], WorldLog] = {}
    for preset in config.presets:
        for part, n, seed in (
            ("train", config.train_tasks, config.seed),
            ("test", config.test_tasks, config.seed + 1),
        ):
            name = f"{preset}.{part}"
            log = world_log(Path(config.out) / "logs", name, preset, n, config.samples, seed)
            logs[(preset, part)] = log
            speed = f"{log.info['executions_per_s']:.0f} executed orchestrations/s"
            say(
                f"{preset} {part}: {log.info['records']} records "
                f"({'reused' if log.reused else speed})"
            )
        if config.edited:
            log = world_log(
                Path(config.out) / "logs", f"{preset}.edits", preset, config.train_tasks,
                config.edited, config.seed, edits_of=config.samples,
            )  # fmt: skip
            logs[(preset, "edits")] = log
            say(f"{preset} edits: {log.info['records']} records of edited plans")
    return logs


def _reward_models(config: DemoConfig, logs: dict, lap) -> WorldRMResult:
    """One reward model per domain (and one on every domain mixed, and one that reads
    the domain), from the training logs, each calibrated on its validation tasks."""
    wanted = [
        (preset, preset, config.multihop_steps if preset == "multihop" else config.steps)
        for preset in config.presets
    ]
    if config.mixed:
        wanted.append(("mixed", None, config.steps))
    if config.unified:
        wanted.append(("unified", None, config.steps))
    return world_reward_models(
        WorldRMConfig(
            out=config.out,
            logs=[logs[key] for key in logs if key[1] != "test"],
            datasets=tuple(
                # Validated once, at the end: in the demo the last step beat the halfway
                # one for every model.
                PairDataset(
                    name,
                    domain,
                    steps=steps,
                    eval_every=steps,
                    folder=name,
                    domain_in_text=name == "unified",
                )
                for name, domain, steps in wanted
            ),
            seed=config.seed,
            train=TrainConfig(
                max_length=config.max_length, lr=config.lr, dtype=config.dtype, seed=config.seed
            ),
        ),
        stage_done=lap,
    )


def _evaluate_preset(config: DemoConfig, preset: str, trained: dict, logs: dict, loaded: dict):
    """Best-of-N on the preset's held-out tasks against the whole line-up (the stage in
    OUT/eval/PRESET), with notes; returns the evaluation and its tasks for the page."""
    others = [p for p in config.presets if p != preset]
    other = others[0] if others else None
    roles = {"rm": preset, "external_rm": other, "mixed_rm": "mixed", "unified_rm": "unified"}
    done = best_of_n(
        Path(config.out) / "eval" / preset,
        logs[(preset, "test")],
        {role: trained[name] for role, name in roles.items() if name in trained},
        samples=config.samples,
        reruns=config.reruns,
        seed=config.seed,
        domain=preset,
        dtype=config.dtype,
        loaded=loaded,
        search_curve=config.search_curve,
    )
    ev = done.evaluation
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
        **({"external-rm": f"the reward model trained on {other}"} if other else {}),
        "world judges": "orchestration level: true success probability + N(0, 0.3) noise; "
        "trajectory level: reads each answer's correctness right 85% of "
        "the time",
    }
    return ev, done.views


def _write_view(out: Path, views: list) -> None:
    """OUT/view.json and OUT/view.html: every preset's held-out tasks with the picks."""
    from orchrm.viewer.html import render_page
    from orchrm.viewer.json_form import view_json
    from orchrm.viewer.task import VIEW_HTML, VIEW_JSON

    (out / VIEW_JSON).write_text(json.dumps(view_json(views)), encoding="utf-8")
    (out / VIEW_HTML).write_text(render_page(views, title="orchrm demo"), encoding="utf-8")


def _say_pairs(trained: WorldRMResult, say) -> None:
    """Each dataset's pairs, by kind and by split."""
    for name, t in trained.datasets.items():
        kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(t.mined.kept.items()))
        splits = ", ".join(f"{n:,} {k}" for k, n in sorted(t.mined.by_split.items()))
        say(f"pairs {name}: {kinds} ({splits})")


def _say_models(config: DemoConfig, trained: WorldRMResult, say) -> None:
    """Each reward model's validation accuracy, precision, speed and texts cut to
    `max_length`, and its calibration where it has one."""
    for name, t in trained.datasets.items():
        summary = t.summary
        say(
            f"reward model {name}: validation pairwise accuracy "
            f"{summary.best_validation_accuracy:.3f} ({summary.dtype}; "
            f"{summary.pairs_per_second:.1f} pairs/s; {summary.truncated_texts} of "
            f"{2 * (summary.train_pairs + summary.validation_pairs)} texts over "
            f"{config.max_length} tokens){' (reused)' if t.reused else ''}"
        )
        if t.calibration is not None:
            c = t.calibration
            say(
                f"calibration {name}: {c.calibration.method} on {c.candidates:,} validation "
                f"samples, ECE {c.ece_raw:.3f} raw -> {c.ece:.3f}"
            )


def run_demo(config: DemoConfig, say=print) -> dict:
    """Run the pipeline; returns the report's numbers (also in OUT/report.json)."""
    out = Path(config.out)
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    mark = started

    def lap(stage: str) -> None:
        """Record the seconds `stage` took since the last lap."""
        nonlocal mark
        now = time.perf_counter()
        seconds[stage], mark = round(now - mark, 1), now

    logs = _generate_logs(config, say)
    lap("generate")
    trained = _reward_models(config, logs, lap)
    _say_pairs(trained, say)
    _say_models(config, trained, say)
    held_out = {n: t.summary.best_validation_accuracy for n, t in trained.datasets.items()}
    truncated = {n: t.summary.truncated_texts for n, t in trained.datasets.items()}
    evaluations, views, loaded = [], [], {}
    for preset in config.presets:
        ev, shown = _evaluate_preset(config, preset, trained.datasets, logs, loaded)
        evaluations.append(ev)
        views += shown
        lap(f"evaluate {preset}")
    _write_view(out, views)
    seconds["total"] = round(time.perf_counter() - started, 1)
    report = write_report(
        evaluations,
        out,
        {
            "validation_accuracy": held_out,
            "truncated_texts": truncated,
            "dtype": {name: t.summary.dtype for name, t in trained.datasets.items()},
            "seconds": seconds,
        },
    )
    for ev in evaluations:
        say(terminal_table(ev))
    say("seconds: " + ", ".join(f"{stage} {s:.0f}" for stage, s in seconds.items()))
    say(f"report: {report} ({time.perf_counter() - started:.0f} s)")
    return {"evaluations": [ev.to_dict() for ev in evaluations], "validation": held_out}
