"""The held-out side of `orchrm.experiments.real_exec.run`: expected accuracy from K seeded
executions of every plan, each draw's verdict, and whether two draws agree.

A draw is one execution seed E: rerun k of every held-out plan is executed with seed
`run_seed(E, k)`. Each candidate's `p_success` is its plan's mean success over the K
runs and its `reruns` the K (answer, correct) pairs, as the world's re-executions give
them (`orchrm.evaluation.reruns`), so `orchrm.evaluation.metrics` reports every
selector's expected accuracy: an argmax selector's is the mean success of the plan it
picks, a vote's is the vote replayed on each of the K runs. The sampled accuracy is that
of run 0 alone.

With two draws, the oracle is also scored with its choice held out (`cross_draw_oracle`):
each task's best plan picked on one draw and scored on the other.

Two draws agree when the paired 95% intervals of Orch-RM minus majority on expected
accuracy have the same sign and both exclude 0, or both cover 0 (`agreement`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, evaluate_tasks, first_candidates
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import Bootstrap, Evaluation, evaluate_selectors
from orchrm.evaluation.report import points
from orchrm.experiments.real_exec.cache import ExecutionCache, Outcome, Plan, outcome, record
from orchrm.jsonl import write_jsonl
from orchrm.selection.selectors import CandidateSet
from orchrm.tasks.benchmarks.generated import RETRIEVAL_KINDS, TASK_KINDS

RUNS_PER_SEED = 1000
"""Re-executions an execution seed holds: run k of seed E has seed E * 1000 + k."""


def run_seed(execution_seed: int, k: int) -> int:
    """The seed of run `k` (0 <= k < RUNS_PER_SEED) of the draw `execution_seed`."""
    if not 0 <= k < RUNS_PER_SEED:
        raise ValueError(f"run {k} of a draw: runs are 0 to {RUNS_PER_SEED - 1}")
    return execution_seed * RUNS_PER_SEED + k


def with_outcomes(
    tasks: list[CandidateSet], outcomes: Mapping[tuple[str, int], Sequence[Outcome]]
) -> list[CandidateSet]:
    """`tasks` with candidate s of task t given `reruns` = `outcomes[(t, s)]` (its K runs)
    and `p_success` = their mean success. Raises KeyError naming a candidate without."""
    out = []
    for task in tasks:
        candidates = []
        for s, c in enumerate(task.candidates):
            runs = tuple(outcomes[(task.task_id, s)])
            p = statistics.fmean(right for _, right in runs) if runs else None
            candidates.append(replace(c, reruns=runs, p_success=p))
        out.append(replace(task, candidates=tuple(candidates)))
    return out


def evaluate_draw(
    plans: list[Plan],
    execution_seed: int,
    k: int,
    cache: ExecutionCache,
    model,
    log: str | Path,
    seed: int = 0,
) -> tuple[Evaluation, Versus, str]:
    """Draw `execution_seed` of the held-out `plans` (one orchestrator's, N a task, their
    runs in `cache`): writes the records of run 0 to `log`, reads them back as candidate
    sets (`tasks_from_logs`), gives each candidate its K runs (`with_outcomes`) and
    evaluates the demo's line-up with the reward model `model` (selectors seeded with
    `seed`) at N = 1, 2, 4, ... up to N. Returns the evaluation, its notes saying the
    runs, Orch-RM minus majority, and the expected accuracies by task kind
    (`kind_table`)."""
    seeds = [run_seed(execution_seed, i) for i in range(k)]
    write_jsonl([record(p, seeds[0], cache) for p in plans], log)
    outcomes = {(p.task.task.id, p.sample): [outcome(p, e, cache) for e in seeds] for p in plans}
    n = 1 + max(p.sample for p in plans)
    held_out = with_outcomes(tasks_from_logs([str(log)], plans[0].writer, n), outcomes)
    lineup = build_lineup(held_out, rm=model, seed=seed)
    ev = evaluate_tasks(lineup.tasks, lineup.selectors, n, domain=held_out[0].domain)
    right = statistics.fmean(ok for runs in outcomes.values() for _, ok in runs)
    ev.notes["runs"] = (
        f"{k} a plan, seeds {seeds[0]} to {seeds[-1]} ({100 * right:.1f}% of them right); "
        "expected: over the runs, sampled: run 0"
    )
    kind_of = {p.task.task.id: p.task.kind for p in plans}
    kinds = kind_table(first_candidates(lineup.tasks, n), lineup.selectors, kind_of, n, seed)
    return ev, versus(ev, execution_seed), kinds


KIND_SELECTORS = ("orchrm", "majority", "logp", "random", "oracle")
"""The selectors `kind_table` shows, where the line-up has them."""


def kind_table(
    tasks: list[CandidateSet], selectors: Mapping, kind_of: Mapping[str, str], n: int, seed: int
) -> str:
    """Expected accuracy % at N = `n` of each of `KIND_SELECTORS` on the tasks of each
    task kind (`kind_of`: task id -> kind) and of the retrieval kinds together, and
    Orch-RM minus majority there with its paired 95% interval over the group's tasks:
    where the reward model's choice pays and where it does not."""
    shown = {s: selectors[s] for s in KIND_SELECTORS if s in selectors}
    groups: dict[str, list[CandidateSet]] = {}
    for task in tasks:
        groups.setdefault(kind_of[task.task_id], []).append(task)
    retrieval = [t for kind in RETRIEVAL_KINDS for t in groups.get(kind, [])]
    rows = [k for k in TASK_KINDS if k in groups]
    if retrieval and len(rows) > 1:
        groups["retrieval"] = retrieval
        rows.append("retrieval")
    lines = [
        f"expected accuracy % at N = {n} by task kind",
        f"{'kind':<10}{'tasks':>6}"
        + "".join(f"{s:>10}" for s in shown)
        + f"{'rm - maj':>10}  (paired 95% CI)",
    ]
    for kind in rows:
        ev = evaluate_selectors(groups[kind], shown, [n], domain=kind, seed=seed)
        at = ev.at(n)
        acc = {s: 100 * (at[s].expected_accuracy or 0.0) for s in shown}
        gap = acc["orchrm"] - acc["majority"] if {"orchrm", "majority"} <= set(acc) else 0.0
        low, high = at["orchrm"].expected_vs_baseline_ci if "majority" in shown else (0, 0)
        lines.append(
            f"{kind:<10}{len(groups[kind]):>6}"
            + "".join(f"{acc[s]:>10.1f}" for s in shown)
            + f"{gap:>+10.1f}  ({100 * low:+.1f} to {100 * high:+.1f})"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Versus:
    """Orch-RM minus majority in one draw, on expected and on sampled accuracy, with
    their paired 95% intervals (shares, not points)."""

    seed: int
    expected: float
    expected_ci: tuple[float, float]
    sampled: float
    sampled_ci: tuple[float, float]

    @property
    def width(self) -> float:
        """Width of the expected-accuracy interval."""
        return self.expected_ci[1] - self.expected_ci[0]

    @property
    def sign(self) -> int:
        """+1 or -1 when the expected interval excludes 0 above or below, 0 when it
        covers it."""
        lo, hi = self.expected_ci
        return 1 if lo > 0 else -1 if hi < 0 else 0

    def line(self) -> str:
        sampled_width = 100 * (self.sampled_ci[1] - self.sampled_ci[0])
        return (
            f"execution seed {self.seed}: orchrm - majority, expected "
            f"{points(self.expected, self.expected_ci)} (width {100 * self.width:.1f}), "
            f"sampled {points(self.sampled, self.sampled_ci)} (width {sampled_width:.1f})"
        )


def versus(ev: Evaluation, seed: int) -> Versus:
    """Orch-RM minus majority at the full N of `ev` (whose candidates have reruns)."""
    rm = ev.at(ev.n)["orchrm"]
    if rm.expected_vs_baseline is None or rm.vs_baseline is None:
        raise ValueError("the evaluation has no orchrm - majority on expected accuracy")
    return Versus(
        seed, rm.expected_vs_baseline, rm.expected_vs_baseline_ci, rm.vs_baseline, rm.vs_baseline_ci
    )


def verdict(ev: Evaluation) -> str:
    """Whether Orch-RM beats majority at the full N on expected accuracy, by how much,
    and at what token cost."""
    at = ev.at(ev.n)
    rm, maj = at["orchrm"], at["majority"]
    lo, hi = rm.expected_vs_baseline_ci
    if lo > 0:
        word = "beats majority vote"
    elif hi < 0:
        word = "falls short of majority vote"
    else:
        word = "is not distinguishable from majority vote"
    ratio = maj.total_tokens / max(rm.total_tokens, 1.0)
    fewer = f"{ratio:.1f}x fewer" if ratio >= 1 else f"{1 / max(ratio, 1e-9):.1f}x more"
    return (
        f"Orch-RM {word} on expected accuracy: {100 * rm.expected_accuracy:.1f}% vs "
        f"{100 * maj.expected_accuracy:.1f}%, "
        f"{points(rm.expected_vs_baseline, rm.expected_vs_baseline_ci)} points (paired 95% "
        f"CI), at {rm.total_tokens:,.0f} vs {maj.total_tokens:,.0f} total tokens a task "
        f"({fewer})"
    )


def agreement(draws: Sequence[Versus]) -> tuple[bool, str]:
    """Whether the draws agree (every expected interval excludes 0 on the same side, or
    every one covers 0), and a sentence that says so."""
    signs = {d.sign for d in draws}
    agree = len(signs) == 1
    shown = ", ".join(f"seed {d.seed}: {points(d.expected, d.expected_ci)}" for d in draws)
    if not agree:
        how = "they disagree: one interval excludes 0 where another does not, or on the other side"
    elif signs == {0}:
        how = "they agree: every interval covers 0 (no difference shown)"
    else:
        side = "above" if signs == {1} else "below"
        how = f"they agree: every interval excludes 0, {side} it"
    return agree, f"orchrm - majority on expected accuracy, {shown}: {how}"


def plan_agreement(
    plans: list[Plan], seeds: Sequence[int], k: int, cache: ExecutionCache
) -> tuple[str, dict[str, float]]:
    """Whether the plans of a task differ in what they reach, by task kind: the
    correlation, over plans, of a plan's success in the first draw with its success in
    the second (each as its mean over the draw's K runs, minus its task's mean over its
    plans). Near 0, which plan of a task was right is the luck of its sampled tokens and
    no reader of the plans can pick better than chance; a correlation well above 0 is a
    difference the plan text can carry. Returns the table as text and as numbers."""
    first, second = seeds[0], seeds[1]
    by_task: dict[str, list[tuple[float, float]]] = {}
    kind_of: dict[str, str] = {}
    for p in plans:
        a = statistics.fmean(outcome(p, run_seed(first, i), cache)[1] for i in range(k))
        b = statistics.fmean(outcome(p, run_seed(second, i), cache)[1] for i in range(k))
        by_task.setdefault(p.task.task.id, []).append((a, b))
        kind_of[p.task.task.id] = p.task.kind
    centred: dict[str, tuple[list[float], list[float]]] = {}
    for task_id, pairs in by_task.items():
        mean_a = statistics.fmean(a for a, _ in pairs)
        mean_b = statistics.fmean(b for _, b in pairs)
        for kind in (kind_of[task_id], "all"):
            xs, ys = centred.setdefault(kind, ([], []))
            xs.extend(a - mean_a for a, _ in pairs)
            ys.extend(b - mean_b for _, b in pairs)
    lines = [
        f"plans of a task, success in draw {first} against draw {second} (correlation)",
        f"{'kind':<10}{'plans':>7}{'r':>8}",
    ]
    numbers = {}
    for kind in [*(k for k in TASK_KINDS if k in centred), "all"]:
        xs, ys = centred[kind]
        spread = statistics.pstdev(xs) > 0 and statistics.pstdev(ys) > 0
        numbers[kind] = statistics.correlation(xs, ys) if spread else float("nan")
        lines.append(f"{kind:<10}{len(xs):>7}{numbers[kind]:>8.2f}")
    return "\n".join(lines), numbers


def _mean_success(
    plans: list[Plan], seeds: Sequence[int], k: int, cache: ExecutionCache
) -> dict[int, dict[tuple[str, int], float]]:
    """Each plan's mean success over its K runs in each of the first two draws, by
    execution seed and (task id, sample)."""
    return {
        e: {
            (p.task.task.id, p.sample): statistics.fmean(
                outcome(p, run_seed(e, i), cache)[1] for i in range(k)
            )
            for p in plans
        }
        for e in seeds[:2]
    }


def _held_out_pick(
    keys: list[tuple[str, int]], picked: dict[tuple[str, int], float], scored: dict
) -> tuple[float, float]:
    """One task's oracle with its choice held out: the mean success on the scoring draw
    (`scored`) of the plans with the best success on the picking draw (`picked`), and
    the best success on the scoring draw (the same-draw oracle)."""
    best = max(picked[key] for key in keys)
    chosen = [key for key in keys if picked[key] == best]
    return statistics.fmean(scored[key] for key in chosen), max(scored[key] for key in keys)


def _oracle_text(
    seeds: Sequence[int],
    rows: dict[str, dict[str, tuple[float, float]]],
    tasks: dict[str, list],
    kind_of: dict[str, str],
    numbers: dict[str, dict],
) -> str:
    """`cross_draw_oracle`'s table by task kind and its one line per pair of draws."""
    a, b = seeds[0], seeds[1]
    lines = [
        "oracle %: each task's best plan picked on one draw, scored on the other (held out), "
        "against picked and scored on the same draw",
        f"{'kind':<10}{'tasks':>6}{f'{a}->{b}':>10}{f'{b}->{b}':>10}{f'{b}->{a}':>10}{f'{a}->{a}':>10}",
    ]
    for kind, cols in rows.items():
        n = sum(1 for t in tasks if kind == "all" or kind_of[t] == kind)
        (ab, bb), (ba, aa) = cols[f"{a}->{b}"], cols[f"{b}->{a}"]
        lines.append(f"{kind:<10}{n:>6}{ab:>10.1f}{bb:>10.1f}{ba:>10.1f}{aa:>10.1f}")
    for pair, x in numbers.items():
        lo, hi = x["ci"]
        lines.append(
            f"picked on draw {pair.split('->')[0]}, scored on draw {pair.split('->')[1]}: "
            f"{100 * x['accuracy']:.1f}% ({100 * lo:.1f}-{100 * hi:.1f}), same-draw oracle "
            f"{100 * x['same_draw']:.1f}%"
        )
    return "\n".join(lines)


def cross_draw_oracle(
    plans: list[Plan], seeds: Sequence[int], k: int, cache: ExecutionCache
) -> tuple[str, dict[str, dict]]:
    """The oracle with its choice held out: each task's best plan picked on one draw (the
    highest mean success over its K runs; tied plans share the pick) and scored on the
    other draw's runs, both ways. Picking and scoring on the same runs takes the maximum
    of noisy means, which overstates the headroom wherever plan success does not repeat
    between draws. Returns the table (by task kind, with the same-draw oracle beside it)
    and, for each "PICK->SCORE" pair of execution seeds, the accuracy, its 95% bootstrap
    interval over tasks and the same-draw oracle of the scoring draw, as shares."""
    success = _mean_success(plans, seeds, k, cache)
    tasks: dict[str, list[tuple[str, int]]] = {}
    kind_of: dict[str, str] = {}
    for p in plans:
        tasks.setdefault(p.task.task.id, []).append((p.task.task.id, p.sample))
        kind_of[p.task.task.id] = p.task.kind
    numbers: dict[str, dict] = {}
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    for pick, score in ((seeds[0], seeds[1]), (seeds[1], seeds[0])):
        held, same = {}, {}
        for task_id, keys in tasks.items():
            held[task_id], same[task_id] = _held_out_pick(keys, success[pick], success[score])
        values = list(held.values())
        numbers[f"{pick}->{score}"] = {
            "accuracy": statistics.fmean(values),
            "ci": Bootstrap().mean(values),
            "same_draw": statistics.fmean(same.values()),
        }
        for kind in [*(x for x in TASK_KINDS if x in kind_of.values()), "all"]:
            ids = [t for t in tasks if kind == "all" or kind_of[t] == kind]
            rows.setdefault(kind, {})[f"{pick}->{score}"] = (
                100 * statistics.fmean(held[t] for t in ids),
                100 * statistics.fmean(same[t] for t in ids),
            )
    return _oracle_text(seeds, rows, tasks, kind_of, numbers), numbers
