"""Orch-RM against majority vote with every plan executed by a real LLM: `orchrm demo`'s
pipeline (logs -> store -> pairs -> reward model -> best-of-N), with the simulated world
replaced by real executions. SmolLM2-135M-Instruct served by llama.cpp on loopback
(`orchrm.runtime.local_llm.LocalLLM`, `slots` parallel slots, `threads` 0: every core)
answers every sub-agent call through orchrm's executor: each plan is parsed, validated,
executed, graded and logged as one `orchrm.run/1` record (`orchrm.tasks.run.make_record`,
as `orchrm run` writes them) with its `execution_seed`. Token counts are the server's
`usage`.

What is real and what is not:
- Tasks: exact-answer questions generated from the seed
  (`orchrm.tasks.benchmarks.generated`: sums, differences, products, "has x, gets y
  more" word problems, two-step sums, comparisons, letter counts, and questions about
  invented places that only a passage of the BM25 corpus answers), each kind at graded
  levels, graded by the benchmark's grader. The web-search sub-agent searches
  `world_corpus`, every place's passages, the same whichever tasks are drawn.
  `calibrate` measures the model's success per kind and level and per sub-agent type;
  `MIX` is the kinds and levels where the types' success differs widely
  (`orchrm.experiments.real_exec.tables`).
- Plans: SmolLM2-135M cannot write a usable plan, so no LLM writes them. Two template
  orchestrators (`orchrm.world.templates.TemplateOrchestrator`) draw a plan structure and
  its wording and write it as harmony XML with a thinking channel, which
  `orchrm.parse.parse_harmony` reads like any orchestrator's text. `base` draws every
  structure alike; `specialized` is told the task's kind and prefers the structures
  `PREFERRED` names for it (`follow` of the time). Each plan's log-probability is the
  log-probability of the template's draws plus a charge per written token, as the
  world's orchestrators report theirs (the `logp` selector reads it). No LLM wrote them,
  so the plans cost 0 orchestrator tokens.
- Execution: real and seeded: every call is sent a seed derived from the execution seed
  and the call's place (`orchrm.runtime.backend.call_seed`: task, sample, agent, step,
  round), and llama.cpp computes every prompt afresh (`NO_PROMPT_CACHE`), so with one
  slot the same execution seed repeats a run exactly (with several slots busy at once,
  llama.cpp's batching changes a few answers). `RunConfig` with small budgets
  (`max_tokens` 96 a call, SC 3 samples, debate 1 round of 2 roles, reflexion 1 round),
  temperature 0.5.
- Reward model: the store, pair mining (specialized-over-base and correct-over-incorrect,
  1:3) and training of `orchrm.experiments.world_models.world_reward_models`, which
  `orchrm demo` runs on world logs and which reads any `orchrm.run/1` logs: MiniLM
  default backbone, fp32, `steps` steps of 16 pairs, Platt-calibrated on its validation
  tasks; trained once, on the training plans executed with the first execution seed.
- Evaluation: best-of-N on held-out tasks (other seed) over the specialized
  orchestrator's N plans, with the demo's line-up and metrics
  (`orchrm.evaluation.lineup.build_lineup`, `evaluate_tasks`): Orch-RM's argmax against
  majority vote, random, logp and the oracle (any correct), paired 95% bootstrap
  intervals over tasks against majority, and tokens (execution from the server's usage,
  the reward model's input tokens as its verification). A draw is one execution seed E:
  every held-out plan runs K times (`reruns`, seeds E * 1000 + k), which gives each
  selector's expected accuracy beside the sampled one of run 0
  (`orchrm.experiments.real_exec.evaluate`). With two execution seeds, the two draws' verdicts
  are compared (`agreement`).

Executions are cached in OUT/executions.jsonl (`orchrm.experiments.real_exec.cache`), by task,
plan text, seed and sample: a second run, a run resumed after an interruption and more
draws execute only what is missing, and a run with nothing missing starts no server.
The cache holds runs of one setup (`execution_setup`: model, budgets, corpus; in
OUT/executions.setup.json): a run with another `max_tokens` on the same OUT is refused.

OUT gets executions.jsonl and its setup, logs/train.jsonl and logs/test.seedE.jsonl (the
records: the training plans' runs, each draw's run 0 of the held-out plans),
logs/train.tasks.jsonl and logs/test.tasks.jsonl (the tasks, as
`orchrm.tasks.benchmarks.generated.save_tasks` writes them), the store, pairs and model,
seed-E/ (report.md, report.json, by_kind.txt and the plots of draw E) and summary.json
(verdicts, agreement, whether the plans of a task differ, execution counts, seconds);
`calibrate` writes calibrate.json and calibrate.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from orchrm.evaluation.report import terminal_table, write_report
from orchrm.experiments.real_exec.cache import (
    Execution,
    ExecutionCache,
    Plan,
    bind_setup,
    record,
    throughput,
    write_plans,
)
from orchrm.experiments.real_exec.evaluate import (
    Versus,
    agreement,
    cross_draw_oracle,
    evaluate_draw,
    plan_agreement,
    run_seed,
    verdict,
)
from orchrm.experiments.real_exec.settings import (
    MIX,
    Clock,
    RealExecSettings,
    Serve,
    cache_path,
    check,
    execution_setup,
    llama,
    run_config,
)
from orchrm.experiments.real_exec.tables import structure_table
from orchrm.experiments.real_exec.tasks import (
    check_validation,
    draw_tasks,
    tasks_only,
    training_plans,
    write_task_files,
)
from orchrm.jsonl import write_jsonl
from orchrm.runtime.retrieval import Retriever
from orchrm.tasks.benchmarks.generated import DOMAIN, TaskSplit, world_corpus
from orchrm.world.templates import TemplateOrchestrator


def _opening(settings: RealExecSettings) -> str:
    """The run's first line: its sizes, execution seeds, server and task mix."""
    sizes, seeds = settings.sizes, settings.execution_seeds
    n, k = sizes.samples, sizes.reruns
    return (
        f"real-exec: {sizes.train_tasks} train tasks x 2 orchestrators x {n} plans, "
        f"{sizes.test_tasks} held-out tasks asked x {n} specialized plans x {k} runs a plan "
        f"for each execution seed ({', '.join(map(str, seeds))}), every plan executed by "
        f"SmolLM2-135M-Instruct (llama.cpp, {settings.slots} slots); plans from templates "
        "(no LLM writes them); mix " + ", ".join(f"{kind}{level}" for kind, level in MIX)
    )


def _plans(settings: RealExecSettings, tasks: TaskSplit) -> tuple[list[Plan], list[Plan]]:
    """The training plans (`training_plans`) and the specialized orchestrator's
    `sizes.samples` plans a held-out task."""
    special = TemplateOrchestrator("specialized", specialized=True, seed=settings.seed)
    train_plans = training_plans(settings, tasks["train"])
    return train_plans, write_plans(special, tasks["test"], settings.sizes.samples)


def _execution_groups(
    settings: RealExecSettings, train_plans: list[Plan], test_plans: list[Plan]
) -> dict[str, tuple[list[Execution], Retriever]]:
    """The executions a run asks for, by group, each with the corpus web search reads:
    `train` (each training plan `train_runs` times, runs 0 to R - 1 of the first
    execution seed) and `test seed E` (each held-out plan `sizes.reruns` times, with runs
    0 to K - 1 of seed E)."""
    seeds, k = settings.execution_seeds, settings.sizes.reruns
    train = [p.at(seed) for seed in train_seeds(settings) for p in train_plans]
    groups = {"train": (train, world_corpus())}
    for e in seeds:
        runs = [p.at(run_seed(e, i)) for p in test_plans for i in range(k)]
        groups[f"test seed {e}"] = (runs, world_corpus())
    return groups


def train_seeds(settings: RealExecSettings) -> list[int]:
    """The seeds of the training plans' runs: runs 0 to `train_runs` - 1 of the first
    execution seed."""
    return [run_seed(settings.execution_seeds[0], r) for r in range(settings.train_runs)]


def _keep_missing(
    groups: dict[str, tuple[list[Execution], Retriever]],
    cache: ExecutionCache,
    say: Callable[[str], None],
) -> dict[str, dict]:
    """Replace each group's executions by those `cache` lacks; says and returns each
    group's counts (executions, cached, to run)."""
    counts = {}
    for name, (executions, retriever) in groups.items():
        hits = cache.hits
        missing = cache.missing(executions)
        groups[name] = (missing, retriever)
        counts[name] = {"executions": len(executions), "cached": cache.hits - hits}
        counts[name]["to run"] = len(missing)
        say(f"{name}: " + ", ".join(f"{v} {c}" for c, v in counts[name].items()))
    return counts


async def execute_groups(
    server, groups: dict[str, tuple[list[Execution], Retriever]], cache, config, clock, say
) -> None:
    """Each group's executions (those the cache lacks, with the group's corpus) on
    `server`, each run kept in `cache` as it ends; laps `serve start` and `execute GROUP`."""
    async with server:
        await server.preflight(("subagent",))
        clock.lap("serve start")
        for name, (missing, retriever) in groups.items():
            if not missing:
                continue
            started = time.perf_counter()
            results = await cache.execute(
                server, missing, config, retriever=retriever, description=f"executing {name}"
            )
            runs = [{"execution": r.to_dict()} for r in results]
            say(f"executed {name}: {throughput(runs, time.perf_counter() - started)}")
            clock.lap(f"execute {name}")


def _execute(
    settings: RealExecSettings,
    backend: Serve,
    train_plans: list[Plan],
    test_plans: list[Plan],
    clock: Clock,
    say: Callable[[str], None],
) -> tuple[ExecutionCache, dict[str, dict]]:
    """The execution stage: the executions the run asks for (`_execution_groups`) that
    cache (`cache_path`) lacks, on `backend`, started only when some are missing; laps
    `plans and cache`. Returns the cache and each group's counts (`_keep_missing`)."""
    groups = _execution_groups(settings, train_plans, test_plans)
    bind_setup(cache_path(settings), execution_setup(settings))
    cache = ExecutionCache(cache_path(settings))
    counts = _keep_missing(groups, cache, say)
    clock.lap("plans and cache")
    if any(missing for missing, _ in groups.values()):
        with backend(settings) as server:
            config = run_config(settings)
            asyncio.run(execute_groups(server, groups, cache, config, clock, say))
    else:
        say(f"every execution is in {cache.path}: no server started")
    return cache, counts


def reward_model(
    settings: RealExecSettings,
    train_plans: list[Plan],
    seeds: Sequence[int],
    cache: ExecutionCache,
    stage_done: Callable[[str], None] = lambda stage: None,
    say: Callable[[str], None] = print,
):
    """The reward model of the training plans' runs with `seeds` (`world_reward_models`,
    dataset `real`): (the trained dataset, the success table by plan structure). With
    several seeds, correct-over-incorrect pairs are judged on each plan's success rate
    over its runs and read as soft labels; with `settings.members` above 1 an ensemble
    is trained."""
    from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
    from orchrm.training.config import SMALL_DATA_LR, TrainConfig

    out, sizes = Path(settings.out), settings.sizes
    logs = out / "logs" / "train.jsonl"
    train_records = [record(p, seed, cache) for seed in seeds for p in train_plans]
    write_jsonl(train_records, logs)
    text, by_structure = structure_table(train_records)
    say("training tasks, success by plan structure and orchestrator:\n" + text)
    evals = max(1, sizes.steps // 3)
    denoise = len(seeds) > 1
    trained = world_reward_models(
        WorldRMConfig(
            out=str(out),
            logs=[str(logs)],
            datasets=(PairDataset("real", DOMAIN, steps=sizes.steps, eval_every=evals),),
            seed=settings.seed,
            denoise_runs=len(seeds) if denoise else 0,
            # `steps` decide the length (epochs only bound it): a few hundred pairs are
            # read several times over, and the best of three validations is kept.
            train=TrainConfig(
                backbone=settings.backbone,
                max_length=128,
                lr=SMALL_DATA_LR,
                dtype="fp32",
                seed=settings.seed,
                epochs=1000.0,
                ensemble=settings.members,
                soft_labels=denoise,
            ),
        ),
        stage_done=stage_done,
    )
    t = trained.datasets["real"]
    say(trained_summary(t))
    return t, by_structure


def trained_summary(t) -> str:
    """One line on a trained dataset (`world_reward_models`' entry): its pairs by kind
    and split, and its model's validation, precision, steps and speed."""
    mined = ", ".join(f"{c} {kind}" for kind, c in sorted(t.mined.kept.items()))
    splits = ", ".join(f"{c} {split}" for split, c in sorted(t.mined.by_split.items()))
    summary = t.summary
    accuracy = summary.best_validation_accuracy
    validated = (
        f"validation pairwise accuracy {accuracy:.3f}"
        if accuracy is not None
        else "no validation pair (none of the validation tasks gave a pair), so not "
        "validated: the model is the last step's"
    )
    return (
        f"pairs: {mined} ({splits}); reward model: {validated} ({summary.dtype}, "
        f"{summary.steps} steps, {summary.pairs_per_second:.1f} pairs/s)"
    )


def _evaluate_seed(
    settings: RealExecSettings,
    e: int,
    test_plans: list[Plan],
    cache: ExecutionCache,
    model,
    clock: Clock,
    say: Callable[[str], None],
) -> tuple[Versus, str]:
    """The draw of execution seed `e` (`evaluate_draw`): says its table, success by task
    kind and verdict, writes OUT/seed-E (report and by_kind.txt) and returns the draw
    and the verdict; laps `evaluate seed E`."""
    out = Path(settings.out)
    log = out / "logs" / f"test.seed{e}.jsonl"
    k = settings.sizes.reruns
    ev, draw, kinds = evaluate_draw(test_plans, e, k, cache, model, log, settings.seed)
    ev.notes["plans"] = "template orchestrators (no LLM writes plans; 0 orchestrator tokens)"
    ev.notes["execution"] = "SmolLM2-135M-Instruct on llama.cpp; tokens from the server's usage"
    clock.lap(f"evaluate seed {e}")
    say(terminal_table(ev, width=120))
    said = verdict(ev)
    say(f"{kinds}\n{said}\n{draw.line()}")
    write_report(
        [ev],
        out / f"seed-{e}",
        {"verdict": said, "design": __doc__.split("OUT gets")[0]},
    )
    (out / f"seed-{e}" / "by_kind.txt").write_text(kinds + "\n")
    return draw, said


def _compare_draws(
    settings: RealExecSettings,
    test_plans: list[Plan],
    cache: ExecutionCache,
    draws: list[Versus],
    say: Callable[[str], None],
) -> dict:
    """With two draws or more: whether their verdicts agree (`agreement`), whether the
    plans of a task differ between them (`plan_agreement`) and the oracle with its choice
    held out (`cross_draw_oracle`), each said; with one, none of these."""
    seeds, k = settings.execution_seeds, settings.sizes.reruns
    agree, sentence = agreement(draws) if len(draws) > 1 else (None, "")
    plans_differ: dict[str, float] = {}
    held_out_oracle: dict[str, dict] = {}
    if sentence:
        say(sentence)
        text, plans_differ = plan_agreement(test_plans, seeds, k, cache)
        say(text)
        text, held_out_oracle = cross_draw_oracle(test_plans, seeds, k, cache)
        say(text)
    return {
        "agree": agree,
        "agreement": sentence,
        "plans_differ": plans_differ,
        "held_out_oracle": held_out_oracle,
    }


def run(
    settings: RealExecSettings, say: Callable[[str], None] = print, backend: Serve = llama
) -> dict:
    """Write the plans, execute what the cache lacks on `backend` (started only then),
    train on the training records, evaluate each execution seed's draw; says the tables,
    writes OUT (module docstring) and returns the verdicts, whether the draws agree and
    the seconds of each stage."""
    from orchrm.scoring.load import load_scorer

    check(settings)
    out, seeds = Path(settings.out), settings.execution_seeds
    (out / "logs").mkdir(parents=True, exist_ok=True)
    say(_opening(settings))
    clock = Clock()
    tasks = draw_tasks(settings, say)
    write_task_files(tasks, out)
    if settings.tasks_only:
        return tasks_only(settings, tasks, say)
    check_validation(settings, tasks["train"])
    train_plans, test_plans = _plans(settings, tasks)
    cache, counts = _execute(settings, backend, train_plans, test_plans, clock, say)
    seeds_of_training = train_seeds(settings)
    t, by_structure = reward_model(settings, train_plans, seeds_of_training, cache, clock.lap, say)
    model = load_scorer(str(t.model), dtype="fp32")
    evaluated = [_evaluate_seed(settings, e, test_plans, cache, model, clock, say) for e in seeds]
    draws = [draw for draw, _ in evaluated]
    comparison = _compare_draws(settings, test_plans, cache, draws, say)
    clock.seconds["total"] = round(clock.total(), 1)
    say("seconds: " + ", ".join(f"{name} {v:.0f}" for name, v in clock.seconds.items()))
    result = {
        "verdicts": {e: said for e, (_, said) in zip(seeds, evaluated, strict=True)},
        "draws": [d.__dict__ | {"width": d.width} for d in draws],
        **comparison,
        "executions": counts,
        "seconds": clock.seconds,
        "sizes": settings.sizes.__dict__,
        "tasks": tasks.sizes(),
        "short": [s.line() for s in tasks.short],
        "mix": [f"{kind}{level}" for kind, level in MIX],
        "train_success_by_structure": by_structure,
        "pairs": t.mined.kept,
        "validation_accuracy": t.summary.best_validation_accuracy,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    say(f"reports: {out}/seed-*/report.md; summary: {out / 'summary.json'}")
    return result
