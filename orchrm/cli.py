"""The `orchrm` command. Thin: it reads arguments, calls the library, prints results."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchrm import __version__
from orchrm.jsonl import printable
from orchrm.parse import ParseSummary, summarize_file
from orchrm.rl.command import rl_command
from orchrm.serve.command import serve_command

app = typer.Typer(
    name="orchrm",
    help="Reward modeling for multi-agent orchestrations: score orchestrations before they run.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        console.print(f"orchrm {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """orchrm: parse, validate, score and select orchestrations."""


@app.command("parse")
def parse_command(
    files: list[Path] = typer.Argument(
        ..., help="JSONL/JSON record files, or plain text files holding one harmony output."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    details: bool = typer.Option(
        False, "--details", help="List every invalid or unparseable record with its line."
    ),
) -> None:
    """Parse and validate orchestrations in FILES and count the outcomes.

    Every record is counted once: valid, parsed but invalid (by rule), or unparseable
    (by reason). A file that cannot be read is reported and the others still are; the
    exit status is then 1.
    """
    summaries, unreadable = [], []
    for f in files:
        try:
            summaries.append(summarize_file(f))
        except OSError as err:
            unreadable.append(_unreadable(f, err))
    total = _total(summaries)
    if as_json:
        out = {"files": [s.to_dict() for s in summaries], "total": total.to_dict()}
        print(json.dumps({**out, "unreadable": unreadable}, indent=2))
        _exit_if_unreadable(unreadable)
        return
    table = Table(title="orchestrations")
    for column in ("file", "records", "valid", "invalid", "unparseable"):
        table.add_column(column, justify="left" if column == "file" else "right", overflow="fold")
    for s in [*summaries, total] if len(summaries) > 1 else summaries:
        table.add_row(s.path, str(s.records), str(s.valid), str(s.invalid), str(s.unparseable))
    console.print(table)
    if total.invalid or total.unparseable:
        causes = Table(title="why not valid")
        for column in ("outcome", "code", "records"):
            causes.add_column(column, justify="right" if column == "records" else "left")
        for rule, n in sorted(total.invalid_by_rule.items()):
            causes.add_row("invalid", rule, str(n))
        for reason, n in sorted(total.unparseable_by_reason.items()):
            causes.add_row("unparseable", reason, str(n))
        console.print(causes)
    problems = [
        (s.path, p["line"], f"{p['kind']} {p['code']}", p["message"])
        for s in summaries
        for p in s.problems
    ]
    _print_problems(problems, None if details else EXAMPLES)
    _exit_if_unreadable(unreadable)


EXAMPLES = 5
"""Problems `parse`, `ingest` and `score` print without --details (the first ones)."""


def _unreadable(path: Path, err: OSError) -> dict:
    """Report a file that cannot be read at all (on stderr) and describe it for JSON."""
    if isinstance(err, FileNotFoundError):
        message = f"no such file: {printable(path)}"
    else:
        message = f"cannot read {printable(path)}: {err.strerror or err}"
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return {"path": printable(path), "error": message}


def _exit_if_unreadable(unreadable: list) -> None:
    if unreadable:
        err_console.print(f"{len(unreadable)} file(s) could not be read", highlight=False)
        raise typer.Exit(1)


def _print_problems(
    problems: list[tuple[str, int, str, str]],
    limit: int | None,
    *,
    to: Console | None = None,
    rest: str = "all: --details",
) -> None:
    """`file:line: code: message` for the first `limit` problems (all when None), the
    messages cut to one screen line; `rest` says where the others are."""
    shown = problems if limit is None else problems[:limit]
    if not shown:
        return
    out = to or console
    if limit is not None:
        out.print(
            f"first {len(shown)} of {len(problems)} problem(s) ({rest}):",
            markup=False,
            highlight=False,
        )
    for path, line, code, message in shown:
        text = message if limit is None or len(message) <= 160 else message[:157] + "..."
        out.print(f"{path}:{line}: {code}: {text}", markup=False, highlight=False)


def _total(summaries: list[ParseSummary]) -> ParseSummary:
    total = ParseSummary("total")
    for s in summaries:
        total.records += s.records
        total.valid += s.valid
        total.invalid += s.invalid
        total.unparseable += s.unparseable
        total.invalid_by_rule += s.invalid_by_rule
        total.unparseable_by_reason += s.unparseable_by_reason
    return total


@app.command("run")
def run_command(
    tasks: Path = typer.Option(
        ..., "--tasks", help="JSONL tasks (question/problem, answer, id), or a --benchmark file."
    ),
    out: Path = typer.Option(Path("runs/run.jsonl"), "--out", help="Where to write the log."),
    backend: str = typer.Option("openai", "--backend", help="LLM backend: openai."),
    base_url: str = typer.Option(
        None, "--base-url", help="OpenAI-compatible server (vLLM, SGLang, hosted API)."
    ),
    api_key: str = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", show_default=False),
    model: str = typer.Option("default", "--model", help="Model for every role not set below."),
    orchestrator_model: str = typer.Option(None, "--orchestrator-model"),
    subagent_model: str = typer.Option(None, "--subagent-model"),
    samples: int = typer.Option(4, "--samples", min=1, help="Orchestrations sampled per task."),
    dom: str = typer.Option("high", "--dom", help="Degree of MAS asked for: low or high."),
    limit: int = typer.Option(None, "--limit", min=1, help="Use only the first N tasks."),
    concurrency: int = typer.Option(8, "--concurrency", min=1),
    timeout: float = typer.Option(300.0, "--timeout", help="Per-call timeout in seconds."),
    retries: int = typer.Option(3, "--retries", min=0, help="Retries of transient errors."),
    temperature: float = typer.Option(0.5, "--temperature"),
    corpus: Path = typer.Option(None, "--corpus", help="JSONL corpus for WebSearchAgent (BM25)."),
    orchestrator_id: str = typer.Option(
        None, "--orchestrator-id", help="Name recorded for the orchestrator (default: its model)."
    ),
    benchmark: str = typer.Option(
        None,
        "--benchmark",
        help="Read --tasks as this benchmark's official file: aime, hotpotqa, browsecomp-plus, "
        "gpqa (orchrm.tasks.loaders).",
    ),
    context: str = typer.Option(
        "question",
        "--context",
        help="hotpotqa: question (paragraphs in the question) or corpus (the search corpus).",
    ),
    seed: int = typer.Option(0, "--seed", help="gpqa: seeds the option order of each question."),
) -> None:
    """Sample orchestrations for each task, execute them, grade them, write a JSONL log."""
    import asyncio

    from orchrm.jsonl import write_jsonl
    from orchrm.runtime.config import RunConfig
    from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
    from orchrm.runtime.retrieval import load_corpus
    from orchrm.runtime.run import load_tasks, run_tasks
    from orchrm.tasks.loaders import load_benchmark, load_benchmark_corpus

    if backend != "openai":
        _fail(f"unknown backend {backend!r}: choose openai")
    if dom not in ("low", "high"):
        _fail(f"--dom must be low or high, got {dom!r}")
    try:
        if benchmark:
            task_list = load_benchmark(benchmark, tasks, limit, seed, context=context)
            retriever = load_benchmark_corpus(
                benchmark, tasks, limit, corpus=corpus, context=context
            )
        else:
            task_list = load_tasks(tasks, limit)
            retriever = load_corpus(corpus) if corpus else None
    except (OSError, ValueError) as err:
        _fail(str(err))
    models = {"orchestrator": orchestrator_model, "subagent": subagent_model}
    config = OpenAIConfig(model=model, models={k: v for k, v in models.items() if v})
    if base_url:
        config.base_url = base_url
    if api_key:
        config.api_key = api_key
    config.timeout_s = timeout
    run_config = RunConfig(
        temperature=temperature,
        call_timeout_s=timeout,
        max_retries=retries,
        concurrency=concurrency,
    )

    async def go() -> list[dict]:
        async with OpenAIBackend(config) as client:
            return await run_tasks(
                task_list,
                client,
                samples=samples,
                dom=dom,
                orchestrator=orchestrator_id or config.model_for("orchestrator"),
                config=run_config,
                retriever=retriever,
            )

    records = asyncio.run(go())
    write_jsonl(records, out)
    _print_run_summary(records, out)


def _print_run_summary(records: list[dict], out: Path) -> None:
    executed = [r for r in records if r["execution"] is not None]
    failed = [r for r in executed if r["execution"]["error"]]
    graded = [r for r in records if r["correct"] is not None]
    table = Table(title=f"run written to {out}")
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        ("orchestration samples", len(records)),
        ("unparseable", sum(r["parse_error"] is not None for r in records)),
        ("parsed but invalid", sum(bool(r["violations"]) for r in records)),
        ("executed", len(executed)),
        ("execution failed", len(failed)),
        ("correct / graded", f"{sum(bool(r['correct']) for r in graded)} / {len(graded)}"),
        ("orchestrator tokens", sum(r["tokens"]["orchestrator"] for r in records)),
        ("execution tokens", sum(r["tokens"]["execution"] for r in records)),
    ]
    for what, n in rows:
        table.add_row(what, str(n))
    console.print(table)


def _fail(message: str) -> None:
    """A user error: one unwrapped line on stderr (the message is not read as markup,
    so paths with brackets print as they are), exit status 2."""
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)
    raise typer.Exit(2)


world_app = typer.Typer(
    help="The offline world: a benchmark with ground truth.", no_args_is_help=True
)
app.add_typer(world_app, name="world")


@world_app.command("generate")
def world_generate(
    preset: str = typer.Option("math", "--preset", help="math, search, multihop or science."),
    tasks: int = typer.Option(300, "--tasks", min=1),
    samples: int = typer.Option(8, "--samples", min=1, help="Samples per task per orchestrator."),
    seed: int = typer.Option(0, "--seed"),
    out: Path = typer.Option(Path("runs/world"), "--out", help="Folder for the logs."),
) -> None:
    """Write world logs (the schema of `orchrm run`, plus true success probabilities):
    OUT/PRESET.jsonl, and the tasks with their hidden attributes in OUT/PRESET.tasks.jsonl."""
    from orchrm.jsonl import write_jsonl
    from orchrm.world.generate import generate

    try:
        generated = generate(preset, tasks, samples, seed)
    except ValueError as err:
        _fail(str(err))
    log, truth = out / f"{preset}.jsonl", out / f"{preset}.tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], truth)
    console.print(
        f"{len(generated.records)} records ({generated.executions} executed, "
        f"{generated.executions_per_s:.0f} executed orchestrations/s) -> {log}; tasks -> {truth}"
    )


@world_app.command("stats")
def world_stats_command(
    presets: str = typer.Option("math,search,multihop,science", "--presets"),
    tasks: int = typer.Option(300, "--tasks", min=1),
    samples: int = typer.Option(8, "--samples", min=2),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Per preset: success of both orchestrators, pass@N, majority@N, Bayes-optimal@N,
    random@N, diversity, and the best single surface feature's pairwise accuracy."""
    from dataclasses import asdict

    from orchrm.world.generate import LOGPROB_FEATURE, generate, world_stats
    from orchrm.world.tasks import PRESETS

    names = [p.strip() for p in presets.split(",") if p.strip()]
    unknown = [p for p in names if p not in PRESETS]
    if unknown:
        _fail(f"unknown preset(s) {', '.join(unknown)}: choose from {', '.join(PRESETS)}")
    results = [
        world_stats(generate(p, tasks, samples, seed, progress=not as_json), samples) for p in names
    ]
    if as_json:
        print(json.dumps([asdict(s) for s in results], indent=2))
        return
    for s in results:
        n = s.samples
        table = Table(title=f"world preset {s.preset}: {s.tasks} tasks, N={n} (%)")
        columns = ["orch.", "succ", "true p", f"pass@{n}", f"maj@{n}", f"bayes@{n}", f"rand@{n}"]
        for column in [*columns, "bayes-maj", "divers."]:
            table.add_column(column, justify="left" if column == "orch." else "right")
        for name, x in s.by_orchestrator.items():
            values = (
                x.mean_success,
                x.mean_p_success,
                x.pass_at_n,
                x.majority_at_n,
                x.bayes_at_n,
                x.random_at_n,
                x.bayes_at_n - x.majority_at_n,
            )
            table.add_row(name, *(f"{100 * v:.1f}" for v in values), f"{x.diversity:.2f}")
        console.print(table)
        console.print(
            f"  best single surface feature: {s.best_feature} "
            f"{100 * s.best_feature_accuracy:.1f}% pairwise accuracy on {s.pairs} "
            f"correct-vs-incorrect pairs (orchestrator log-prob: "
            f"{100 * s.feature_accuracy[LOGPROB_FEATURE]:.1f}%); "
            f"{s.executions_per_s:.0f} executed orchestrations/s"
        )


STORE_OPTION = typer.Option(
    Path("orchrm.duckdb"), "--store", envvar="ORCHRM_STORE", help="The DuckDB store file."
)


def _open_store(path: Path, read_only: bool = False):
    from orchrm.store.db import Store, StoreError

    if read_only and not path.exists():
        _fail(f"no store at {path}: ingest something first")
    try:
        return Store(path, read_only=read_only)
    except StoreError as err:
        _fail(str(err))


@app.command("ingest")
def ingest_command(
    files: list[Path] = typer.Argument(..., help="Log files, or MAS-Orchestra step folders."),
    store: Path = STORE_OPTION,
    adapter: str = typer.Option(
        "auto", "--adapter", help="auto, orchrm, diagram, steps, preference or generic."
    ),
    strict: bool = typer.Option(False, "--strict", help="A malformed record keeps a file out."),
    domain: str = typer.Option(None, "--domain", help="Domain of records that name none."),
    orchestrator: str = typer.Option(None, "--orchestrator", help="Orchestrator id (steps)."),
    mapping: list[str] = typer.Option(
        None, "--map", help="generic: FIELD=COLUMN, e.g. question=prompt (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    details: bool = typer.Option(False, "--details", help="List every malformed record."),
) -> None:
    """Ingest logs into the store. Every record is counted: added, already there
    (duplicate) or malformed (with file, line and reason). A file that cannot be read
    (or, with --strict, holds a malformed record) is reported and left out, the others
    are still ingested, and the exit status is 1."""
    from orchrm.store.ingest import IngestError, IngestSummary, ingest_file

    pairs = [m.split("=", 1) for m in mapping or []]
    if any(len(p) != 2 for p in pairs):
        _fail("--map takes FIELD=COLUMN")
    given = {"domain": domain, "orchestrator": orchestrator, "map": dict(pairs) or None}
    options = {k: v for k, v in given.items() if v}
    summaries = []
    with _open_store(store) as db:
        for path in files:
            try:
                summary = ingest_file(
                    db, path, adapter, strict=strict, options=options, progress=not as_json
                )
            except IngestError as err:
                summary = IngestSummary(printable(path), adapter, error=str(err))
                err_console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False)
            summaries.append(summary)
    if as_json:
        print(json.dumps([s.to_dict() for s in summaries], indent=2))
    else:
        _print_ingest(summaries, store, details)
    failed = [s for s in summaries if s.error]
    if failed:
        err_console.print(f"{len(failed)} file(s) not ingested", highlight=False)
        raise typer.Exit(1)


def _print_ingest(summaries: list, store: Path, details: bool) -> None:
    """The ingest table, malformed counts by reason, and the first (or every) problem."""
    table = Table(title=f"ingested into {printable(store)}")
    for column in ("file", "adapter", "records", "added", "duplicates", "malformed"):
        table.add_column(
            column, justify="left" if column in ("file", "adapter") else "right", overflow="fold"
        )
    for s in summaries:
        counts = (s.records, s.added, s.duplicates, s.malformed)
        table.add_row(s.path, s.adapter, *(("-",) * 4 if s.error else map(str, counts)))
    console.print(table)
    for s in summaries:
        for reason, n in sorted(s.malformed_by_reason.items()):
            console.print(f"  {s.path}: {n} malformed ({reason})", markup=False, highlight=False)
        if s.blank_lines:
            console.print(f"  {s.path}: {s.blank_lines} blank line(s)", markup=False)
        if s.error:
            console.print(f"  {s.path}: not ingested: {s.error}", markup=False, highlight=False)
    problems = [
        (s.path, p["line"], p["reason"], p["message"]) for s in summaries for p in s.problems
    ]
    _print_problems(problems, None if details else EXAMPLES)


store_app = typer.Typer(help="The artifact store.", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("stats")
def store_stats(
    store: Path = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """What the store holds: rows per table, orchestrations per orchestrator and their
    outcomes, pairs per dataset, kind and split."""
    from orchrm.store.db import store_summary

    with _open_store(store, read_only=True) as db:
        summary = store_summary(db)
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
        return
    console.print(
        f"store {store} (schema {summary['schema_version']}): "
        + ", ".join(f"{n} {t}" for t, n in summary["counts"].items()),
        highlight=False,
    )
    table = Table(title="orchestrations")
    columns = [
        "orchestrator",
        "domain",
        "step",
        "total",
        "valid",
        "invalid",
        "unparseable",
        "executed",
        "correct",
    ]
    for column in columns:
        table.add_column(column, justify="right" if column not in columns[:2] else "left")
    for row in summary["orchestrations"]:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in columns))
    console.print(table)
    if summary["pairs"]:
        pairs = Table(title="pairs")
        for column in ("dataset", "kind", "split", "pairs", "tasks"):
            pairs.add_column(column, justify="right" if column in ("pairs", "tasks") else "left")
        for row in summary["pairs"]:
            pairs.add_row(*(str(row[c]) for c in ("dataset", "kind", "split", "pairs", "tasks")))
        console.print(pairs)


pairs_app = typer.Typer(help="Win/lose pairs: mine and export.", no_args_is_help=True)
app.add_typer(pairs_app, name="pairs")


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


@pairs_app.command("mine")
def pairs_mine(
    store: Path = STORE_OPTION,
    dataset: str = typer.Option("default", "--dataset"),
    ratio: str = typer.Option("1:0:3", "--ratio", help="SoB:SoO:CoI mix."),
    cap: int = typer.Option(16, "--cap", min=1, help="Most pairs of one kind per task."),
    specialized: str = typer.Option(None, "--specialized", help="Specialized orchestrator ids."),
    base: str = typer.Option(None, "--base", help="Base orchestrator ids."),
    step_threshold: int = typer.Option(
        None, "--step-threshold", help="Checkpoints at/after this step are specialized."
    ),
    specialized_for: list[str] = typer.Option(
        None, "--specialized-for", help="ORCHESTRATOR=DOMAIN, for SoO pairs (repeatable)."
    ),
    no_invalid_rejected: bool = typer.Option(
        False, "--no-invalid-rejected", help="Never pair a rule-breaking orchestration."
    ),
    domain: str = typer.Option(None, "--domain", help="Mine one domain only."),
    split: str = typer.Option("0.8,0.1,0.1", "--split", help="Train,validation,test shares."),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Mine correct-over-incorrect, specialized-over-base and specialized-over-other-domain
    pairs, cap them per task, mix them, and split them by task."""
    from dataclasses import asdict

    from orchrm.store.pairs import MineConfig, mine

    try:
        sob, soo, coi = (float(x) for x in ratio.split(":"))
        shares = tuple(float(x) for x in split.split(","))
        targets = dict(x.split("=", 1) for x in specialized_for or [])
    except ValueError:
        _fail("--ratio is SoB:SoO:CoI, --split three shares, --specialized-for ORCH=DOMAIN")
    config = MineConfig(
        dataset=dataset,
        ratio={"sob": sob, "soo": soo, "coi": coi},
        cap_per_task=cap,
        specialized=_csv(specialized),
        base=_csv(base),
        step_threshold=step_threshold,
        specialized_for=targets,
        allow_invalid_rejected=not no_invalid_rejected,
        domain=domain,
        split=shares,
        seed=seed,
    )
    with _open_store(store) as db:
        try:
            summary = mine(db, config)
        except ValueError as err:
            _fail(str(err))
    if as_json:
        print(json.dumps(asdict(summary), indent=2))
        return
    console.print(
        f"dataset {summary.dataset!r}: kept {summary.kept} of available "
        f"{summary.available}; pairs by split {summary.by_split}; tasks by split "
        f"{summary.tasks_by_split}",
        highlight=False,
    )
    for kind in summary.left_out:
        console.print(
            f"  no {kind} pair available: left out of the mix (see --specialized, "
            "--base, --step-threshold, --specialized-for)",
            highlight=False,
        )


@pairs_app.command("export")
def pairs_export(
    out: Path = typer.Option(
        ..., "--out", help="Folder (jsonl, parquet) or file (orchrm-datasets)."
    ),
    store: Path = STORE_OPTION,
    dataset: str = typer.Option("default", "--dataset"),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl, parquet or orchrm-datasets."),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Reward-model text budget."),
    tokenizer: str = typer.Option(
        None, "--tokenizer", help="Count the budget with this model's tokenizer (dir or id)."
    ),
) -> None:
    """Export a dataset as preference data (prompt/chosen/rejected, one file per split) or
    in the OrchRM-datasets format (input/chosen/rejected/source)."""
    from orchrm.store.pairs import export, export_orchrm_datasets

    with _open_store(store, read_only=True) as db:
        try:
            if fmt == "orchrm-datasets":
                n = export_orchrm_datasets(db, out, dataset)
                console.print(f"{n} pairs -> {out}")
                return
            count = None
            if tokenizer:
                from orchrm.rm.model import ModelError, backbone_budget

                try:
                    max_tokens, count = backbone_budget(tokenizer, max_tokens)
                except ModelError as err:
                    _fail(str(err))

            written = export(db, out, dataset, fmt, max_tokens, count)
        except ValueError as err:
            _fail(str(err))
    for part, path in written.items():
        console.print(f"{part}: {path}")


@app.command("train")
def train_command(
    pairs: Path = typer.Option(..., "--pairs", help="Export folder (train/validation files)."),
    out: Path = typer.Option(Path("runs/rm"), "--out", help="Where the model is written."),
    backbone: str = typer.Option("", "--backbone", help="HF model dir/id (default: MiniLM)."),
    max_length: int = typer.Option(256, "--max-length"),
    epochs: float = typer.Option(1.0, "--epochs"),
    max_steps: int = typer.Option(None, "--max-steps"),
    batch_size: int = typer.Option(16, "--batch-size"),
    grad_accumulation: int = typer.Option(1, "--grad-accumulation"),
    lr: float = typer.Option(5e-5, "--lr"),
    eval_every: int = typer.Option(50, "--eval-every"),
    early_stopping: int = typer.Option(None, "--early-stopping", help="Evaluations w/o gain."),
    lora: bool = typer.Option(False, "--lora", help="Train LoRA adapters (r=32, alpha=32)."),
    margin: bool = typer.Option(False, "--margin", help="Use each pair's margin field."),
    center_rewards: float = typer.Option(None, "--center-rewards"),
    bf16: bool = typer.Option(None, "--bf16/--no-bf16", help="Default: when the hardware is fast."),
    seed: int = typer.Option(0, "--seed"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code"),
) -> None:
    """Train a Bradley-Terry reward model on exported pairs (progress bar with live loss,
    accuracy and ETA). Multi-process: `accelerate launch ... -m orchrm.rm.train`."""
    from orchrm.rm.config import TrainConfig
    from orchrm.rm.model import ModelError
    from orchrm.rm.train import train

    config = TrainConfig(
        pairs=str(pairs),
        out=str(out),
        backbone=backbone,
        max_length=max_length,
        epochs=epochs,
        max_steps=max_steps,
        batch_size=batch_size,
        grad_accumulation=grad_accumulation,
        lr=lr,
        eval_every=eval_every,
        early_stopping=early_stopping,
        lora=lora,
        margin=margin,
        center_rewards=center_rewards,
        bf16=bf16,
        seed=seed,
        trust_remote_code=trust_remote_code,
    )
    try:
        summary = train(config, resume=resume)
    except (ModelError, ValueError, OSError) as err:
        _fail(str(err))
    history = summary["history"][-1] if summary["history"] else {}
    console.print(
        f"trained {summary['steps']} steps on {summary['train_pairs']} pairs "
        f"({summary['pairs_per_second']:.1f} pairs/s, {summary['processes']} process(es)); "
        f"best validation accuracy {summary['best_validation_accuracy']}; last by kind "
        f"{history.get('accuracy_by_kind', {})}; {summary['truncated_texts']} texts truncated; "
        f"model -> {out / 'model'}",
        highlight=False,
    )


@app.command("evaluate-rm")
def evaluate_rm_command(
    pairs: Path = typer.Argument(..., help="An exported pair file, e.g. runs/pairs/test.jsonl."),
    rm: Path = typer.Option(..., "--rm", help="A trained reward model directory."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Pairwise accuracy of a reward model on held-out pairs: overall, per kind, per domain."""
    from orchrm.rm.model import ModelError
    from orchrm.rm.train import evaluate_file

    try:
        metrics = evaluate_file(rm, pairs)
    except (ModelError, ValueError, OSError) as err:
        _fail(str(err))
    if as_json:
        print(json.dumps(metrics, indent=2))
        return
    console.print(
        f"{metrics['pairs']} pairs: accuracy {metrics['accuracy']:.3f}; by kind "
        + ", ".join(f"{k} {v:.3f}" for k, v in metrics["accuracy_by_kind"].items())
        + "; by domain "
        + ", ".join(f"{k} {v:.3f}" for k, v in metrics["accuracy_by_domain"].items()),
        highlight=False,
    )


@app.command("score")
def score_command(
    files: list[Path] = typer.Argument(..., help="Record files (any form `orchrm parse` reads)."),
    rm: Path = typer.Option(..., "--rm", help="A trained reward model directory."),
    out: Path = typer.Option(None, "--out", help="JSONL of scores (default: stdout)."),
    batch_size: int = typer.Option(32, "--batch-size"),
) -> None:
    """Score every orchestration in FILES with a reward model: one JSON line per record
    (file, line, task_id, score or null with the reason). The summary (records scored,
    the others by reason, the first few with file:line) goes to stderr. A file that
    cannot be read is reported, the others are still scored, and the exit status is 1."""
    from orchrm.jsonl import write_jsonl
    from orchrm.rm.model import ModelError, OrchRM

    try:
        model = OrchRM.load(rm, batch_size=batch_size)
    except ModelError as err:
        _fail(str(err))
    rows, items, problems, unreadable = _score_rows(files)
    scores = model.score_batch([(q, o) for _, q, o in items])
    for (n, _, _), s in zip(items, scores, strict=True):
        rows[n]["score"] = s
    if out:
        write_jsonl(rows, out)
    else:
        for row in rows:
            print(json.dumps(row))
    by_reason = Counter(p[2] for p in problems)
    err_console.print(
        f"{len(items)} of {len(rows)} records scored"
        + (f" -> {printable(out)}" if out else "")
        + "".join(f"; {n} {reason}" for reason, n in sorted(by_reason.items())),
        markup=False,
        highlight=False,
    )
    _print_problems(problems, EXAMPLES, to=err_console, rest="each row carries its reason")
    _exit_if_unreadable(unreadable)


def _score_rows(files: list[Path]) -> tuple[list[dict], list, list, list]:
    """(output rows, (row index, question, orchestration) to score, problems, unreadable
    files) for the records of FILES; a file that cannot be read adds no row."""
    from orchrm.parse.records import score_inputs

    rows, items, problems, unreadable = [], [], [], []
    for path in files:
        try:
            inputs = list(score_inputs(path))
        except OSError as err:
            unreadable.append(_unreadable(path, err))
            continue
        name = printable(path)
        for item in inputs:
            row = {"file": name, "line": item.line, "task_id": item.task_id, "score": None}
            if item.reason:
                row["reason"] = item.reason
                problems.append((name, item.line, item.reason, item.message))
            else:
                items.append((len(rows), item.question, item.orchestration))
            rows.append(row)
    return rows, items, problems, unreadable


@app.command("eval")
def eval_command(
    logs: list[Path] = typer.Argument(None, help="orchrm.run/1 logs of the held-out tasks."),
    store: Path = typer.Option(None, "--store", help="Read the tasks from a store instead."),
    held_out_of: str = typer.Option(
        None, "--held-out-of", help="Leave out tasks in this pair dataset's train/validation."
    ),
    rm: Path = typer.Option(None, "--rm", help="The Orch-RM reward model directory."),
    external_rm: Path = typer.Option(None, "--external-rm", help="Any HF reward model dir."),
    orchestrator: str = typer.Option(None, "--orchestrator", help="Whose samples (default all)."),
    n: int = typer.Option(8, "--n", min=1, help="Candidates per task."),
    world_tasks: list[Path] = typer.Option(
        None, "--world-tasks", help="PRESET.tasks.jsonl: the world plays the judges."
    ),
    reruns: int = typer.Option(
        20,
        "--reruns",
        min=0,
        help="With --world-tasks: re-executions of every candidate, for the votes' expected "
        "accuracy (0: none).",
    ),
    judge_base_url: str = typer.Option(None, "--judge-base-url", help="A real judge server."),
    judge_model: str = typer.Option("default", "--judge-model"),
    domain: str = typer.Option(
        None, "--domain", help="Only this domain (default: every domain, a table each)."
    ),
    out: Path = typer.Option(Path("runs/eval"), "--out"),
) -> None:
    """Best-of-N on held-out logs or a store: a Markdown table per domain (accuracy with
    95% CI, normalized advantage, verification and total tokens), PNG plots and a JSON of
    every number."""
    from orchrm.bestofn.lineup import by_domain, evaluate_tasks, selectors, world_judge
    from orchrm.bestofn.metrics import tasks_from_logs, tasks_from_store
    from orchrm.bestofn.report import markdown, write_report
    from orchrm.rm.model import ModelError, OrchRM
    from orchrm.store.db import StoreError

    if bool(logs) == bool(store):
        _fail("give either log files or --store (one of them)")
    if held_out_of and not store:
        _fail("--held-out-of needs --store (pair datasets live in the store)")
    try:
        if store:
            with _open_store(store, read_only=True) as db:
                tasks = tasks_from_store(db, orchestrator, n, domain, held_out_of)
        else:
            tasks = tasks_from_logs([str(p) for p in logs], orchestrator, n, domain)
    except (StoreError, ValueError, OSError) as err:
        _fail(str(err))
    try:
        model = OrchRM.load(rm) if rm else None
        external = OrchRM.load(external_rm, check_version=False) if external_rm else None
    except ModelError as err:
        _fail(str(err))
    judge = None
    if world_tasks:
        from orchrm.bestofn.reruns import with_reruns

        judge = world_judge(list(world_tasks))
        try:
            tasks = with_reruns(tasks, list(judge.tasks.values()), reruns)
        except ValueError as err:
            _fail(str(err))
    elif judge_base_url:
        from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig

        judge = OpenAIBackend(OpenAIConfig(base_url=judge_base_url, model=judge_model))
    chosen = selectors(rm=model, external_rm=external, judge=judge, world=bool(world_tasks))
    evaluations = [
        evaluate_tasks(group, chosen, n, name)
        for name, group in by_domain(tasks).items()
        if any(len(t.candidates) >= n for t in group)
    ]
    if not evaluations:
        _fail(
            f"no task in the {'store' if store else 'logs'} has {n} samples"
            + (f" from {orchestrator}" if orchestrator else "")
        )
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(markdown(ev), highlight=False)
    console.print(f"report -> {out}")


@app.command("cross-validate")
def cross_validate_command(
    store: Path = STORE_OPTION,
    n: int = typer.Option(8, "--n", min=1, help="Candidates per task."),
    orchestrator: str = typer.Option(None, "--orchestrator", help="Whose samples (default all)."),
    folds: int = typer.Option(None, "--folds", min=2, help="Folds of tasks (default: one each)."),
    specialized: str = typer.Option(None, "--specialized", help="Specialized orchestrator ids."),
    base: str = typer.Option(None, "--base", help="Base orchestrator ids."),
    step_threshold: int = typer.Option(
        None, "--step-threshold", help="Checkpoints at/after this step are specialized."
    ),
    epochs: float = typer.Option(3.0, "--epochs", help="Reward-model epochs per fold."),
    max_length: int = typer.Option(256, "--max-length"),
    backbone: str = typer.Option("", "--backbone", help="HF model dir (default MiniLM)."),
    seed: int = typer.Option(0, "--seed"),
    out: Path = typer.Option(Path("runs/loto"), "--out"),
) -> None:
    """Best-of-N under leave-one-task-out (or k-fold) cross-validation, for logs too small
    to hold out tasks: each task is scored by a reward model trained on the others."""
    from orchrm.bestofn.crossval import LotoConfig, cross_validate
    from orchrm.bestofn.report import markdown, write_report
    from orchrm.rm.config import TrainConfig
    from orchrm.rm.model import ModelError
    from orchrm.store.pairs import MineConfig

    config = LotoConfig(
        out=str(out),
        n=n,
        orchestrator=orchestrator,
        folds=folds,
        mine=MineConfig(
            dataset="loto",
            specialized=_csv(specialized),
            base=_csv(base),
            step_threshold=step_threshold,
        ),
        train=TrainConfig(epochs=epochs, max_length=max_length, backbone=backbone),
        seed=seed,
    )
    with _open_store(store) as db:
        try:
            evaluations = cross_validate(db, config, say=lambda m: console.print(m))
        except (ValueError, ModelError) as err:
            _fail(str(err))
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(markdown(ev), highlight=False)
    console.print(f"report -> {out}")


@app.command("demo")
def demo_command(
    out: Path = typer.Option(Path("orchrm-demo"), "--out"),
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


app.command("serve")(serve_command)
app.command("rl")(rl_command)
