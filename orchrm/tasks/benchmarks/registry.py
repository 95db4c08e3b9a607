"""Every benchmark by name (`BENCHMARKS`), and loading one: `orchrm run --benchmark NAME
--tasks FILE` reads its tasks with `load_benchmark` and its search corpus with
`load_benchmark_corpus`; `orchrm.tasks.grading` grades a domain with the benchmark of that
name. A benchmark is registered here once, by adding its module's `BENCHMARK`."""

from __future__ import annotations

from pathlib import Path

from orchrm.errors import ConfigError
from orchrm.runtime.retrieval import BM25Retriever, load_corpus
from orchrm.tasks.benchmarks import aime, browsecomp_plus, gpqa, hotpotqa
from orchrm.tasks.benchmarks.base import Benchmark, check_unique_ids, existing
from orchrm.tasks.task import Task

BENCHMARKS: dict[str, Benchmark] = {
    module.BENCHMARK.name: module.BENCHMARK for module in (aime, hotpotqa, browsecomp_plus, gpqa)
}
"""Name -> benchmark; a task's `domain` is the name of the benchmark it was loaded from."""

BENCHMARK_NAMES = tuple(BENCHMARKS)
"""The names `orchrm run --benchmark` accepts."""

CONTEXTS = ("question", "corpus")


def load_benchmark(
    name: str,
    path: str | Path,
    limit: int | None = None,
    seed: int = 0,
    *,
    context: str = "question",
) -> list[Task]:
    """The first `limit` tasks (all by default, in file order) of benchmark `name` from
    `path`. `seed` decides GPQA's option order (per record, the same on every run);
    `context` decides where HotpotQA's paragraphs go: into the question (`question`, the
    distractor setting) or into the search corpus (`corpus`, see
    `load_benchmark_corpus`). Raises ConfigError for an unknown name or context, and
    InputError for a missing file, a file of another format, or a bad record."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}: choose one of {', '.join(BENCHMARK_NAMES)}")
    if context not in CONTEXTS:
        raise ConfigError(f"unknown context {context!r}: choose question or corpus")
    path = existing(path)
    tasks: list[Task] = []
    for task in BENCHMARKS[name].load(path, seed, context):
        if limit is not None and len(tasks) >= limit:
            break
        tasks.append(task)
    check_unique_ids(path, tasks)
    return tasks


def load_benchmark_corpus(
    name: str,
    path: str | Path,
    limit: int | None = None,
    *,
    corpus: str | Path | None = None,
    context: str = "question",
) -> BM25Retriever | None:
    """The search corpus for benchmark `name`'s first `limit` tasks in `path`, as a BM25
    retriever, or None when the benchmark has none.

    A `corpus` file (JSONL, `id` or `docid`, `text`, optional `title`/`url`; the
    BrowseComp-Plus corpus as exported from `Tevatron/browsecomp-plus-corpus`) wins for any
    benchmark. Without it, the benchmark's own `documents` make the corpus: BrowseComp-Plus
    pools the evidence, gold and negative documents its query records carry, and HotpotQA
    with `context="corpus"` pools the paragraphs of the loaded questions."""
    if corpus is not None:
        return load_corpus(existing(corpus))
    path = existing(path)
    benchmark = BENCHMARKS.get(name)
    if benchmark is None or benchmark.documents is None:
        return None
    docs = benchmark.documents(path, limit, context)
    return None if docs is None else BM25Retriever(docs)
