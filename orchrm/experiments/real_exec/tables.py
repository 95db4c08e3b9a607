"""The success tables of `orchrm.experiments.real_exec.run`: each sub-agent type alone per
task kind and level (`calibration_table`, what `calibrate` measures to choose the task
mix) and each plan structure and orchestrator per task kind (`structure_table`, on the
training plans of a run)."""

from __future__ import annotations

import statistics
from collections import defaultdict

from orchrm.tasks.benchmarks.generated import TASK_KINDS
from orchrm.world.templates import SINGLE, STRUCTURES

SPREAD = 30.0
"""`calibration_table` marks a cell whose best and worst sub-agent types are this many
points apart or more: a cell where the plan decides the outcome."""


def calibration_table(records: list[dict]) -> dict:
    """Success % per (kind, level) and sub-agent type, with row and column means, as
    text and as numbers; a cell where the types are `SPREAD` points apart or more and
    the mean is at most 80% is marked `*`."""
    types = list(SINGLE)
    by: dict[tuple, list[bool]] = defaultdict(list)
    tokens: dict[str, list[int]] = defaultdict(list)
    for r in records:
        by[(r["kind"], r["level"], r["agent_type"])].append(r["correct"])
        by[(r["kind"], r["level"], "all")].append(r["correct"])
        by[("all", 0, r["agent_type"])].append(r["correct"])
        tokens[r["agent_type"]].append(r["execution"]["total_tokens"])
    cells = sorted(
        {(r["kind"], r["level"]) for r in records},
        key=lambda c: (list(TASK_KINDS).index(c[0]), c[1]),
    )

    def pct(xs: list[bool]) -> float:
        return 100 * statistics.fmean(xs) if xs else float("nan")

    head = f"{'kind':<10}{'level':>6}{'tasks':>6}" + "".join(f"{t[:-5]:>10}" for t in types)
    lines = [
        "success % by task kind and level (one run per task and sub-agent type)",
        head + f"{'mean':>8}",
    ]
    numbers = {}
    for kind, level in cells:
        row = [pct(by[(kind, level, t)]) for t in types]
        mean = pct(by[(kind, level, "all")])
        known = [x for x in row if x == x]  # not NaN: the types that ran on this cell
        mark = " *" if known and max(known) - min(known) >= SPREAD and mean <= 80 else ""
        n = len(by[(kind, level, types[0])])
        lines.append(
            f"{kind:<10}{level:>6}{n:>6}" + "".join(_cell(x) for x in row) + f"{mean:>8.0f}{mark}"
        )
        numbers[f"{kind}{level}"] = {**dict(zip(types, row, strict=True)), "mean": mean, "tasks": n}
    overall = [pct(by[("all", 0, t)]) for t in types]
    lines.append(f"{'all':<10}{'':>6}{'':>6}" + "".join(_cell(x) for x in overall))
    lines.append(
        f"{'tokens':<10}{'':>6}{'':>6}"
        + "".join(_cell(statistics.fmean(tokens[t] or [float("nan")])) for t in types)
        + "   (mean execution tokens a run)"
    )
    lines.append(f"*: sub-agent types {SPREAD:.0f} points or more apart, mean at most 80%")
    return {
        "text": "\n".join(lines),
        "cells": numbers,
        "types": dict(zip(types, overall, strict=True)),
    }


def _cell(x: float) -> str:
    """A number of the calibration table, `-` where no run was made."""
    return f"{'-':>10}" if x != x else f"{x:>10.0f}"


def structure_table(records: list[dict]) -> tuple[str, dict]:
    """Success % of each plan structure and orchestrator, over all records and per task
    kind (`kind` of each record), as text and as {row: {kind or "all": %}}; a row with no
    plan of a kind shows `-` there."""
    by: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in records:
        for row in (r["structure"], f"orchestrator {r['orchestrator']}"):
            by[(row, "all")].append(bool(r["correct"]))
            by[(row, r["kind"])].append(bool(r["correct"]))
    kinds = [k for k in TASK_KINDS if any(key[1] == k for key in by)]
    rows = [*STRUCTURES, *sorted({row for row, _ in by if row.startswith("orchestrator")})]
    lines = [f"{'plan':<26}{'plans':>7}{'all %':>7}" + "".join(f"{k:>9}" for k in kinds)]
    numbers: dict[str, dict[str, float]] = {}
    for row in rows:
        if not by.get((row, "all")):
            continue
        numbers[row] = {
            k: 100 * statistics.fmean(by[(row, k)]) for k in ("all", *kinds) if by.get((row, k))
        }
        cells = "".join(
            f"{numbers[row][k]:>9.0f}" if k in numbers[row] else f"{'-':>9}" for k in kinds
        )
        lines.append(f"{row:<26}{len(by[(row, 'all')]):>7}{numbers[row]['all']:>7.1f}{cells}")
    return "\n".join(lines), numbers
