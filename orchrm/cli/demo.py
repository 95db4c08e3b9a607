"""`orchrm demo`: the whole story offline, from world logs to a best-of-8 report."""

from __future__ import annotations

from pathlib import Path

import typer

from orchrm.cli.console import console


def demo_command(
    out: Path = typer.Option(
        Path("orchrm-demo"), "--out", help="Folder for logs, store, pairs, models and the report."
    ),
    train_tasks: int = typer.Option(
        None, "--train-tasks", min=10, help="World tasks per preset for training [300]."
    ),
    test_tasks: int = typer.Option(None, "--test-tasks", min=10, help="Held-out tasks [100]."),
    steps: int = typer.Option(
        None, "--steps", min=1, help="Training steps of the math and mixed reward models [180]."
    ),
    multihop_steps: int = typer.Option(
        None, "--multihop-steps", min=1, help="Training steps of the multihop reward model [45]."
    ),
    bf16: bool = typer.Option(None, "--bf16/--no-bf16", help="Default: when the hardware is fast."),
    reruns: int = typer.Option(
        None, "--reruns", min=0, help="Re-executions per candidate for the votes [20]."
    ),
    seed: int = typer.Option(None, "--seed", help="[0]"),
) -> None:
    """The whole story offline: world logs -> store -> pairs -> reward models -> best-of-8
    against every selector on held-out tasks -> report in OUT. Options left out take
    `DemoConfig`'s defaults (shown in brackets)."""
    from orchrm.demo import DemoConfig, run_demo

    given = {
        "train_tasks": train_tasks,
        "test_tasks": test_tasks,
        "steps": steps,
        "multihop_steps": multihop_steps,
        "bf16": bf16,
        "reruns": reruns,
        "seed": seed,
    }
    config = DemoConfig(out=str(out), **{k: v for k, v in given.items() if v is not None})
    run_demo(config, say=lambda m: console.print(m, highlight=False))
