"""The real-execution study's tasks and training plans (`orchrm.experiments.real_exec.run`):
the training and held-out tasks drawn from the mix (`MIX`) and their files, the check
that the pair split puts some training task in validation, and the template
orchestrators' plans for the training tasks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchrm.errors import ConfigError
from orchrm.experiments.real_exec.cache import Plan, write_plans
from orchrm.experiments.real_exec.settings import MIX, RealExecSettings
from orchrm.tasks.benchmarks.generated import TaskSplit, save_tasks, split_tasks
from orchrm.world.templates import TemplateOrchestrator


def draw_tasks(settings: RealExecSettings, say: Callable[[str], None] = print) -> TaskSplit:
    """The training and held-out tasks (`train`, `test`), drawn from one pool without
    replacement (`split_tasks`): no question in both, none twice in one. Says each part's
    size and every cell that ran out of questions."""
    sizes = settings.sizes
    split = split_tasks(MIX, {"train": sizes.train_tasks, "test": sizes.test_tasks}, settings.seed)
    for line in split.lines():
        say(f"tasks {line}")
    return split


def write_task_files(split: TaskSplit, out: str | Path) -> list[Path]:
    """Each part's tasks as OUT/logs/PART.tasks.jsonl (`save_tasks`: one task a line,
    with its `question`); returns the paths."""
    return [
        save_tasks(tasks, Path(out) / "logs" / f"{part}.tasks.jsonl")
        for part, tasks in split.parts.items()
    ]


def check_validation(settings: RealExecSettings, train: list) -> None:
    """Raise ConfigError when the pair split (`PAIR_SPLIT`, seeded with `seed`) puts no
    training task in validation: the reward model would have nothing to validate and be
    calibrated on. Known from the task ids alone, so it is said before anything runs."""
    from orchrm.experiments.world_models import PAIR_SPLIT
    from orchrm.store.pairs import split_of_tasks

    ids = [t.task.id for t in train]
    if "validation" in split_of_tasks(ids, PAIR_SPLIT, settings.seed).values():
        return
    more = []
    for i in range(len(ids), len(ids) + 400):
        kind, level = MIX[i % len(MIX)]
        more.append(f"train-{i:03d}-{kind}{level}")
    splits = split_of_tasks(more, PAIR_SPLIT, settings.seed)
    first = next((i for i, task_id in enumerate(more) if splits[task_id] == "validation"), None)
    hint = f"give --train-tasks {len(ids) + first + 1} or more, or " if first is not None else ""
    raise ConfigError(
        f"seed {settings.seed}: none of the {len(ids)} training tasks falls in the pair "
        f"split's validation share ({PAIR_SPLIT[1]:.0%} of tasks, by task id), so no reward "
        f"model could be validated; {hint}another --seed"
    )


def tasks_only(settings: RealExecSettings, split: TaskSplit, say: Callable[[str], None]) -> dict:
    """Say where the task files are and whether a run of them would be refused for want
    of validation tasks; returns the split's sizes and shortfalls."""
    say(f"tasks written to {Path(settings.out) / 'logs'}/{{train,test}}.tasks.jsonl")
    try:
        check_validation(settings, split["train"])
    except ConfigError as err:
        say(f"a run of these tasks would be refused: {err}")
    say("nothing executed (--tasks-only)")
    return {"tasks": split.sizes(), "short": [s.line() for s in split.short]}


def training_plans(settings: RealExecSettings, tasks: list) -> list[Plan]:
    """`sizes.samples` plans a task from each template orchestrator, specialized first."""
    writers = [
        TemplateOrchestrator(name, name == "specialized", seed=settings.seed)
        for name in ("specialized", "base")
    ]
    return [p for w in writers for p in write_plans(w, tasks, settings.sizes.samples)]
