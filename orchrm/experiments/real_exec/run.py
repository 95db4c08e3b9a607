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
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.errors import ConfigError
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
    RUNS_PER_SEED,
    agreement,
    cross_draw_oracle,
    evaluate_draw,
    plan_agreement,
    run_seed,
    verdict,
)
from orchrm.experiments.real_exec.tables import calibration_table, structure_table
from orchrm.jsonl import write_jsonl
from orchrm.orchestration.agent_types import AGENT_REGISTRY
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.runtime.retrieval import Retriever
from orchrm.tasks.benchmarks.generated import (
    DOMAIN,
    EVERY_CELL,
    TASK_KINDS,
    TaskSplit,
    grade,
    make_tasks,
    save_tasks,
    split_tasks,
    world_corpus,
)
from orchrm.world.templates import (
    SINGLE,
    TemplateOrchestrator,
    single_plan,
)

MIX: tuple[tuple[str, int], ...] = (
    ("add", 1),
    ("mul", 1),
    ("compare", 1),
    ("capital", 1),
    ("capital", 2),
    ("founded", 1),
    ("founded", 2),
)
"""(kind, level) cells the train and test tasks cycle through: where `calibrate`
measured the best and worst sub-agent types `SPREAD` points apart or more
(`orchrm.experiments.real_exec.tables`; seed 0, 12 arithmetic tasks a cell over two
calibrations, 6 retrieval tasks a cell; docs/results.md): CoT or SC against Debate or
Reflexion on small sums, products and comparisons, and web search against every other
type on the retrieval questions one passage answers. `capital1`, the same one-passage
question as `capital2` whose 6 tasks had none right, completes the retrieval cells."""


@dataclass(frozen=True)
class Sizes:
    """How many tasks, plans a task (N), training steps and executions of each held-out
    plan a draw (K) a run has."""

    train_tasks: int
    test_tasks: int
    samples: int
    steps: int
    reruns: int


QUICK = Sizes(train_tasks=6, test_tasks=6, samples=4, steps=20, reruns=2)
FULL = Sizes(train_tasks=56, test_tasks=140, samples=4, steps=150, reruns=3)


@dataclass(frozen=True)
class RealExecSettings:
    """One run's settings: the sizes, the server's and the executor's."""

    out: str = "runs/real-exec"
    sizes: Sizes = FULL
    execution_seeds: tuple[int, ...] = (0, 1)
    """One draw each: held-out run k of seed E has seed E * 1000 + k; the training plans
    run once, with seed E * 1000 of the first."""
    max_tokens: int = 96
    """Completion tokens a sub-agent call."""
    slots: int = 8
    """llama.cpp's parallel slots."""
    threads: int = 0
    """llama.cpp's threads (0: every core)."""
    concurrency: int = 16
    """Plans executed at once."""
    seed: int = 0
    tasks_only: bool = False
    """Write the training and held-out task files into OUT/logs and stop: nothing runs."""
    calibrate_tasks: int = 4
    """`calibrate`: tasks a (kind, level) cell."""
    kinds: tuple[str, ...] = ()
    """`calibrate`: these task kinds only (empty: every kind)."""


def run_config(settings: RealExecSettings) -> RunConfig:
    """Small budgets for a 135M model on two CPU cores."""
    return RunConfig(
        max_tokens=settings.max_tokens,
        sc_samples=3,
        debate_rounds=1,
        reflexion_rounds=1,
        concurrency=settings.concurrency,
        call_timeout_s=180.0,
    )


@dataclass
class Clock:
    """Seconds per stage, in order."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        """Add the seconds since the last lap to `stage`."""
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self.mark, 1)
        self.mark = now

    def total(self) -> float:
        return time.perf_counter() - self.started


def serve(settings: RealExecSettings) -> LocalLLM:
    """The llama.cpp server of SmolLM2-135M-Instruct, started by `with`."""
    return LocalLLM(LocalLLMConfig(slots=settings.slots, ctx_size=2048, threads=settings.threads))


NO_PROMPT_CACHE = {"cache_prompt": False}
"""Sent with every request: llama.cpp computes each prompt afresh instead of reusing a
cached prefix, whose logits differ in the last bits from a fresh computation, so that
the same seed repeats a run."""


def _server(llm: LocalLLM) -> OpenAIBackend:
    return OpenAIBackend(
        OpenAIConfig(base_url=llm.base_url, model=llm.model, extra_body=NO_PROMPT_CACHE)
    )


# --------------------------------------------------------------------------- calibrate


async def _calibrate_runs(
    server: OpenAIBackend, items: list[RunItem], config: RunConfig, retriever: Retriever
):
    async with server:
        await server.preflight(("subagent",))
        return await execute_many(
            items, server, config, retriever=retriever, description="calibrating"
        )


def calibrate(settings: RealExecSettings, say: Callable[[str], None] = print) -> dict:
    """Each sub-agent type alone (a one-agent plan) once on `calibrate_tasks` tasks of
    every kind and level; says the success per cell and per type, writes OUT/calibrate.json
    and OUT/calibrate.jsonl, and returns the table (`calibration_table`)."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = settings.kinds or tuple(TASK_KINDS)
    cells = tuple(c for c in EVERY_CELL if c[0] in kinds or f"{c[0]}{c[1]}" in kinds)
    tasks = make_tasks(cells, len(cells) * settings.calibrate_tasks, settings.seed, "cal")
    items, rows = [], []
    for t in tasks:
        for agent_type, structure in SINGLE.items():
            if AGENT_REGISTRY[agent_type].searches and not t.documents:
                continue  # nothing to search for an arithmetic task
            seed = run_seed(settings.execution_seeds[0], 0)
            plan = single_plan(structure)
            items.append(RunItem(plan, t.task.question, t.task.id, len(items), seed))
            rows.append((t, agent_type))
    config = run_config(settings)
    clock = Clock()
    say(f"calibrating: {len(tasks)} tasks x their sub-agent types = {len(items)} runs")
    with serve(settings) as llm:
        clock.lap("serve start")
        results = asyncio.run(_calibrate_runs(_server(llm), items, config, world_corpus()))
        clock.lap("execute")
    records = [
        {
            "task_id": t.task.id,
            "kind": t.kind,
            "level": t.level,
            "question": t.task.question,
            "ground_truth": t.task.answer,
            "agent_type": agent_type,
            "answer": result.answer,
            "correct": bool(grade(result.answer, t.task.answer)),
            "error": result.error,
            "execution": result.to_dict(),
        }
        for (t, agent_type), result in zip(rows, results, strict=True)
    ]
    write_jsonl(records, out / "calibrate.jsonl")
    table = calibration_table(records)
    say(table["text"])
    say(throughput(records, clock.seconds["execute"]))
    say("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in clock.seconds.items()))
    (out / "calibrate.json").write_text(json.dumps(table, indent=2))
    return table


# --------------------------------------------------------------------------- benchmark


Serve = Callable[[RealExecSettings], AbstractContextManager]
"""Settings -> a `with` block that yields a `ChatBackend` to execute on, which `async
with` opens and which answers `preflight` (`llama`: SmolLM2 on llama.cpp)."""


@contextmanager
def llama(settings: RealExecSettings) -> Iterator[OpenAIBackend]:
    """A client of SmolLM2-135M-Instruct on llama.cpp (`serve`), for the `with` block."""
    with serve(settings) as llm:
        yield _server(llm)


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


def execution_setup(settings: RealExecSettings) -> dict:
    """What decides a run's answers besides its task, plan, seed and sample
    (`orchrm.experiments.real_exec.cache.bind_setup`): the served model, the sub-agents'
    budgets and sampling, and the corpus web search reads."""
    config = run_config(settings)
    budgets = ("temperature", "max_tokens", "sc_samples", "debate_rounds", "reflexion_rounds")
    searching = ("search_iterations", "search_k")
    passages = "\n".join(f"{d.id}\t{d.text}" for d in world_corpus().documents)
    return {
        "model": LocalLLMConfig().alias,
        **{name: getattr(config, name) for name in (*budgets, *searching)},
        "corpus_sha256": hashlib.sha256(passages.encode()).hexdigest(),
    }


def check(settings: RealExecSettings) -> None:
    """Raise ConfigError for settings no run can have."""
    seeds, k = settings.execution_seeds, settings.sizes.reruns
    if not seeds or len(set(seeds)) < len(seeds) or min(seeds) < 0:
        raise ConfigError(f"execution seeds {seeds}: give one or more distinct seeds >= 0")
    if not 1 <= k < RUNS_PER_SEED:
        raise ConfigError(f"reruns {k}: give 1 to {RUNS_PER_SEED - 1} executions a plan")


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


def reward_model(
    settings: RealExecSettings,
    train_plans: list[Plan],
    train_seed: int,
    cache: ExecutionCache,
    stage_done: Callable[[str], None] = lambda stage: None,
    say: Callable[[str], None] = print,
):
    """The reward model of the training plans' runs with `train_seed` (`world_reward_models`,
    dataset `real`): (the trained dataset, the success table by plan structure)."""
    from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
    from orchrm.training.config import SMALL_DATA_LR, TrainConfig

    out, sizes = Path(settings.out), settings.sizes
    logs = out / "logs" / "train.jsonl"
    train_records = [record(p, train_seed, cache) for p in train_plans]
    write_jsonl(train_records, logs)
    text, by_structure = structure_table(train_records)
    say("training tasks, success by plan structure and orchestrator:\n" + text)
    evals = max(1, sizes.steps // 3)
    trained = world_reward_models(
        WorldRMConfig(
            out=str(out),
            logs=[str(logs)],
            datasets=(PairDataset("real", DOMAIN, steps=sizes.steps, eval_every=evals),),
            seed=settings.seed,
            # `steps` decide the length (epochs only bound it): a few hundred pairs are
            # read several times over, and the best of three validations is kept.
            train=TrainConfig(
                max_length=128, lr=SMALL_DATA_LR, dtype="fp32", seed=settings.seed, epochs=1000.0
            ),
        ),
        stage_done=stage_done,
    )
    t = trained.datasets["real"]
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
    say(
        f"pairs: {mined} ({splits}); reward model: {validated} ({summary.dtype}, "
        f"{summary.steps} steps, {summary.pairs_per_second:.1f} pairs/s)"
    )
    return t, by_structure


def run(
    settings: RealExecSettings, say: Callable[[str], None] = print, backend: Serve = llama
) -> dict:
    """Write the plans, execute what the cache lacks on `backend` (started only then),
    train on the training records, evaluate each execution seed's draw; says the tables,
    writes OUT (module docstring) and returns the verdicts, whether the draws agree and
    the seconds of each stage."""
    from orchrm.scoring.local import OrchRM

    check(settings)
    sizes, out, seeds = settings.sizes, Path(settings.out), settings.execution_seeds
    n, k = sizes.samples, sizes.reruns
    (out / "logs").mkdir(parents=True, exist_ok=True)
    say(
        f"real-exec: {sizes.train_tasks} train tasks x 2 orchestrators x {n} plans, "
        f"{sizes.test_tasks} held-out tasks asked x {n} specialized plans x {k} runs a plan "
        f"for each execution seed ({', '.join(map(str, seeds))}), every plan executed by "
        f"SmolLM2-135M-Instruct (llama.cpp, {settings.slots} slots); plans from templates "
        "(no LLM writes them); mix " + ", ".join(f"{kind}{level}" for kind, level in MIX)
    )
    clock = Clock()
    tasks = draw_tasks(settings, say)
    write_task_files(tasks, out)
    if settings.tasks_only:
        return tasks_only(settings, tasks, say)
    check_validation(settings, tasks["train"])
    special = TemplateOrchestrator("specialized", specialized=True, seed=settings.seed)
    train_plans = training_plans(settings, tasks["train"])
    test_plans = write_plans(special, tasks["test"], n)
    train_seed = run_seed(seeds[0], 0)
    groups = {"train": ([p.at(train_seed) for p in train_plans], world_corpus())}
    for e in seeds:
        runs = [p.at(run_seed(e, i)) for p in test_plans for i in range(k)]
        groups[f"test seed {e}"] = (runs, world_corpus())
    bind_setup(out / "executions.jsonl", execution_setup(settings))
    cache = ExecutionCache(out / "executions.jsonl")
    counts = {}
    for name, (executions, retriever) in groups.items():
        hits = cache.hits
        missing = cache.missing(executions)
        groups[name] = (missing, retriever)
        counts[name] = {"executions": len(executions), "cached": cache.hits - hits}
        counts[name]["to run"] = len(missing)
        say(f"{name}: " + ", ".join(f"{v} {c}" for c, v in counts[name].items()))
    clock.lap("plans and cache")
    if any(missing for missing, _ in groups.values()):
        with backend(settings) as server:
            config = run_config(settings)
            asyncio.run(execute_groups(server, groups, cache, config, clock, say))
    else:
        say(f"every execution is in {cache.path}: no server started")

    t, by_structure = reward_model(settings, train_plans, train_seed, cache, clock.lap, say)
    summary = t.summary
    model = OrchRM.load(t.model, dtype="fp32")

    draws, verdicts = [], {}
    for e in seeds:
        log = out / "logs" / f"test.seed{e}.jsonl"
        ev, draw, kinds = evaluate_draw(test_plans, e, k, cache, model, log, settings.seed)
        ev.notes["plans"] = "template orchestrators (no LLM writes plans; 0 orchestrator tokens)"
        ev.notes["execution"] = "SmolLM2-135M-Instruct on llama.cpp; tokens from the server's usage"
        clock.lap(f"evaluate seed {e}")
        say(terminal_table(ev, width=120))
        verdicts[e] = verdict(ev)
        say(f"{kinds}\n{verdicts[e]}\n{draw.line()}")
        write_report(
            [ev],
            out / f"seed-{e}",
            {"verdict": verdicts[e], "design": __doc__.split("OUT gets")[0]},
        )
        (out / f"seed-{e}" / "by_kind.txt").write_text(kinds + "\n")
        draws.append(draw)
    agree, sentence = agreement(draws) if len(draws) > 1 else (None, "")
    plans_differ: dict[str, float] = {}
    held_out_oracle: dict[str, dict] = {}
    if sentence:
        say(sentence)
        text, plans_differ = plan_agreement(test_plans, seeds, k, cache)
        say(text)
        text, held_out_oracle = cross_draw_oracle(test_plans, seeds, k, cache)
        say(text)
    total = clock.total()
    clock.seconds["total"] = round(total, 1)
    say("seconds: " + ", ".join(f"{name} {v:.0f}" for name, v in clock.seconds.items()))
    result = {
        "verdicts": verdicts,
        "draws": [d.__dict__ | {"width": d.width} for d in draws],
        "agree": agree,
        "agreement": sentence,
        "plans_differ": plans_differ,
        "held_out_oracle": held_out_oracle,
        "executions": counts,
        "seconds": clock.seconds,
        "sizes": sizes.__dict__,
        "tasks": tasks.sizes(),
        "short": [s.line() for s in tasks.short],
        "mix": [f"{kind}{level}" for kind, level in MIX],
        "train_success_by_structure": by_structure,
        "pairs": t.mined.kept,
        "validation_accuracy": summary.best_validation_accuracy,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    say(f"reports: {out}/seed-*/report.md; summary: {out / 'summary.json'}")
    return result
