"""Where the demo's evaluation stage spends its time, part by part.

    .venv/bin/python benchmarks/eval_profile.py [--demo DIR] [--preset math] [--dtype D]
        [--search-curve] [--json EVALUATION.json]

Reads a finished `orchrm demo --out DIR` (its held-out log, world tasks and reward model)
and runs its best-of-N stage again as `orchrm.experiments.stages.best_of_n` does, with
clocks on every part: loading the model, re-executing the candidates on the world,
building the line-up, the reward model's scoring (split into parsing and rendering,
tokenizing, and the model's forward passes), each selector's own work at each N (its
scoring excluded), the bootstrap intervals, the evaluation's own bookkeeping (the
subsets, the replays, the calibration report) and the page of every task's picks. It
prints each part's seconds and share of the stage, the plans the model scored, and the
stage's wall time. Nothing is written into DIR.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import MissingInput
from orchrm.experiments.demo.config import DemoConfig
from orchrm.rmodel.precision import DTYPES
from orchrm.world.tasks import PRESETS

CLOCK: dict[str, float] = defaultdict(float)
COUNT: dict[str, int] = defaultdict(int)
_scoring = [0.0]
"""Seconds spent scoring inside the selector now running (taken off its own time)."""
DEMO = DemoConfig()
"""The demo's settings: its evaluation's are the defaults."""


@config(frozen=True)
class ProfileSettings:
    """The profile's options; those of the evaluation default to the demo's."""

    demo: str = DEMO.out
    """A finished demo's --out."""
    preset: Literal[tuple(PRESETS)] = "math"
    """The preset whose evaluation runs."""
    dtype: Literal[DTYPES] = DEMO.dtype
    """Precision of the reward model."""
    samples: int = setting(DEMO.samples, min=2)
    """Candidates per task (best-of-N's largest N)."""
    reruns: int = setting(DEMO.reruns, min=0)
    """Re-executions of every candidate."""
    seed: int = DEMO.seed
    """Seed of the re-executions."""
    json: str | None = None
    """Also write the evaluation here, to compare tables."""
    search_curve: bool = DEMO.search_curve
    """orchrm-search at every N, as the demo's."""


@contextmanager
def clock(part: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        CLOCK[part] += time.perf_counter() - start


def _wrap(owner, name: str, part: str):
    """Put a clock around `owner.name`, adding to `part`."""
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        with clock(part):
            return inner(*args, **kwargs)

    setattr(owner, name, timed)


class TimedSelector:
    """A selector whose calls charge their time, scoring excluded, to 'selector NAME'."""

    def __init__(self, name: str, select) -> None:
        self.name, self.select = name, select

    def __getattr__(self, attr):
        return getattr(self.select, attr)

    def __call__(self, task):
        start, scored = time.perf_counter(), _scoring[0]
        try:
            return self.select(task)
        finally:
            own = time.perf_counter() - start - (_scoring[0] - scored)
            CLOCK[f"selector {self.name}"] += own


def main(args: ProfileSettings) -> None:
    """Run the demo's best-of-N stage with the clocks on and print each part's time."""
    demo = Path(args.demo)
    log = demo / "logs" / f"{args.preset}.test.jsonl"
    world = demo / "logs" / f"{args.preset}.test.tasks.jsonl"
    model_dir = demo / "rm" / args.preset / "model"
    for path in (log, world, model_dir):
        if not path.exists():
            raise MissingInput(f"{path} is missing: run `orchrm demo --out {demo}` first")

    import tempfile

    from orchrm.evaluation import metrics
    from orchrm.evaluation.lineup import (
        build_lineup,
        evaluate_tasks,
        first_candidates,
        offline_selectors,
        read_world_tasks,
    )
    from orchrm.evaluation.loading import tasks_from_logs
    from orchrm.scoring import base, local
    from orchrm.scoring.local import OrchRM
    from orchrm.viewer.page import selections, write_evaluation_view

    # scoring: the model's forward passes, the tokenizer, and the parsing and rendering
    forward = local.rewards

    def timed_rewards(*a, **k):
        with clock("scoring: model forward"):
            return forward(*a, **k)

    local.rewards = timed_rewards
    score_texts = OrchRM.score_texts

    def timed_score_texts(self, texts):
        COUNT["texts scored"] += len(texts)
        COUNT["scoring rounds"] += 1
        start = time.perf_counter()
        before = CLOCK["scoring: model forward"]
        try:
            return score_texts(self, texts)
        finally:
            spent = time.perf_counter() - start
            CLOCK["scoring: tokenize"] += spent - (CLOCK["scoring: model forward"] - before)

    OrchRM.score_texts = timed_score_texts
    score_round = base.RenderingScorer._score_round

    def timed_round(self, items):
        start = time.perf_counter()
        before = CLOCK["scoring: model forward"] + CLOCK["scoring: tokenize"]
        try:
            return score_round(self, items)
        finally:
            spent = time.perf_counter() - start
            inner = CLOCK["scoring: model forward"] + CLOCK["scoring: tokenize"] - before
            CLOCK["scoring: parse and render"] += spent - inner
            _scoring[0] += spent

    base.RenderingScorer._score_round = timed_round
    _wrap(metrics.Bootstrap, "_interval", "bootstrap intervals")

    started = time.perf_counter()
    with clock("load the model"):
        model = OrchRM.load(str(model_dir), dtype=args.dtype)
    with clock("read logs and world tasks"):
        tasks = tasks_from_logs([str(log)], "specialized", args.samples)
        world_tasks = read_world_tasks([world])
    with clock("re-execute candidates, build the line-up"):
        lineup = build_lineup(
            tasks, rm=model, world_tasks=world_tasks, reruns=args.reruns, seed=args.seed
        )
    timed = {name: TimedSelector(name, s) for name, s in lineup.selectors.items()}
    with clock("evaluate (all N)"):
        ev = evaluate_tasks(
            lineup.tasks, timed, args.samples, args.preset, False, curve=args.search_curve
        )
    with clock("view page"), tempfile.TemporaryDirectory() as out:
        shown = first_candidates(lineup.tasks, args.samples)
        picks = selections(shown, offline_selectors(lineup))
        write_evaluation_view(out, shown, picks, title="profile")
    wall = time.perf_counter() - started
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(ev.to_dict(), indent=1))

    scoring = sum(v for k, v in CLOCK.items() if k.startswith("scoring:"))
    selectors = sum(v for k, v in CLOCK.items() if k.startswith("selector "))
    rest = CLOCK["evaluate (all N)"] - scoring - selectors - CLOCK["bootstrap intervals"]
    print(f"{'part':<44}{'seconds':>9}{'share':>8}")
    rows = [(k, v) for k, v in CLOCK.items() if k != "evaluate (all N)"]
    rows.append(("evaluation's own bookkeeping", rest))
    for part, seconds in sorted(rows, key=lambda kv: -kv[1]):
        if seconds >= 0.05:
            print(f"{part:<44}{seconds:>9.1f}{seconds / wall:>8.1%}")
    print(f"{'scoring, all of it':<44}{scoring:>9.1f}{scoring / wall:>8.1%}")
    print(f"{'wall, the stage (model load included)':<44}{wall:>9.1f}")
    print(
        f"texts scored {COUNT['texts scored']:,} in {COUNT['scoring rounds']:,} rounds "
        f"({COUNT['texts scored'] / max(1, len(lineup.tasks)):.1f} a task, {ev.tasks} tasks); "
        f"precision {model.dtype}"
    )


if __name__ == "__main__":
    run_script(ProfileSettings, main, doc=__doc__)
