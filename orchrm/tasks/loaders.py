"""Tasks of the paper's real benchmarks, read from the files their publishers distribute.

`orchrm run --benchmark NAME --tasks FILE` reads its tasks here: each loader turns one
official file format into `Task`s whose `domain` is the benchmark's name, so
`orchrm.grading.GRADERS` grades their answers with the benchmark's checker:

- `aime`: JSONL `id`, `problem`, `answer` (a file, or a folder of `*.jsonl`); integer
  answers, the math checker;
- `hotpotqa`: the distractor-setting dev JSON, a list of `_id`, `question`, `answer`,
  `context` [[title, [sentences]], ...]; exact match after normalization;
- `browsecomp-plus`: the decrypted JSONL, `query_id`, `query`, `answer` (and the
  `evidence_docs`/`gold_docs`/`negative_docs` lists); short-answer match;
- `gpqa`: the official CSV, `Question`, `Correct Answer`, `Incorrect Answer 1..3`,
  `Record ID`; the options shuffled and shown as (A)..(D), the answer a letter.

`load_benchmark_corpus` gives the search corpus WebSearchAgent reads, where the benchmark
has one. A missing file, a file of another format, or a bad record raises ValueError
naming the file, the record and what is wrong.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

from orchrm.errors import ConfigError, InputError
from orchrm.jsonl import read_jsonl
from orchrm.runtime.retrieval import BM25Retriever, Document, load_corpus
from orchrm.tasks.config import BENCHMARK_NAMES
from orchrm.tasks.run import Task

BENCHMARKS = BENCHMARK_NAMES
CONTEXTS = ("question", "corpus")

HOTPOTQA_INSTRUCTION = "Answer with a short span (a name, a date, a number) or yes/no."
BROWSECOMP_INSTRUCTION = "Give the exact answer as a short phrase."
GPQA_INSTRUCTION = "Give the letter (A, B, C or D) of the correct option as the final answer."
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1")
GPQA_COLUMNS += ("Incorrect Answer 2", "Incorrect Answer 3")


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
    `load_benchmark_corpus`). Raises ValueError for an unknown name, a missing file, a
    file of another format, or a bad record."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}: choose one of {', '.join(BENCHMARKS)}")
    if context not in CONTEXTS:
        raise ConfigError(f"unknown context {context!r}: choose question or corpus")
    path = _existing(path)
    if name == "aime":
        records = (_aime_task(*item) for item in _aime_records(path))
    elif name == "hotpotqa":
        records = (
            _hotpotqa_task(path, i, r, context == "question") for i, r in _hotpotqa_records(path)
        )
    elif name == "browsecomp-plus":
        records = (_browsecomp_task(path, n, r) for n, r in _jsonl_objects(path))
    else:
        records = (_gpqa_task(path, n, row, seed) for n, row in _gpqa_rows(path))
    tasks: list[Task] = []
    for task in records:
        if limit is not None and len(tasks) >= limit:
            break
        tasks.append(task)
    _check_unique_ids(path, tasks)
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
    benchmark. Without it, BrowseComp-Plus pools the evidence, gold and negative documents
    its query records carry, and HotpotQA with `context="corpus"` pools the paragraphs of
    the loaded questions (one document per article title)."""
    if corpus is not None:
        return load_corpus(_existing(corpus))
    path = _existing(path)
    docs: dict[str, Document] = {}
    if name == "browsecomp-plus":
        for n, (line_no, record) in enumerate(_jsonl_objects(path)):
            if limit is not None and n >= limit:
                break
            for field in ("evidence_docs", "gold_docs", "negative_docs"):
                for doc in record.get(field) or []:
                    if not isinstance(doc, dict) or "docid" not in doc or "text" not in doc:
                        raise InputError(f"{path}:{line_no}: {field} entry without docid/text")
                    docid, url = str(doc["docid"]), str(doc.get("url") or "")
                    docs.setdefault(docid, Document(docid, str(doc["text"]), url))
    elif name == "hotpotqa" and context == "corpus":
        for n, (index, record) in enumerate(_hotpotqa_records(path)):
            if limit is not None and n >= limit:
                break
            for title, sentences in _paragraphs(path, index, record):
                # A title is one Wikipedia article's lead paragraph in every record.
                docs.setdefault(title, Document(title, "".join(sentences).strip(), title))
    else:
        return None
    return BM25Retriever(list(docs.values()))


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    return path


def _check_unique_ids(path: Path, tasks: list[Task]) -> None:
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise InputError(f"{path}: task id {task.id!r} appears twice")
        seen.add(task.id)


def _jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each line, which must be a JSON object."""
    for line_no, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise InputError(f"{path}:{line_no}: a record must be a JSON object")
        yield line_no, record


def _field(where: str, record: dict, key: str, kind: type | tuple[type, ...] = str):
    """`record[key]`, which must be a non-empty value of `kind`."""
    value = record.get(key)
    if value is None or not isinstance(value, kind) or isinstance(value, bool):
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise InputError(f"{where}: field {key!r} is {got}, not a {_kind_name(kind)}")
    if isinstance(value, str) and not value.strip():
        raise InputError(f"{where}: field {key!r} is empty")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "string", int: "number", float: "number", list: "list", dict: "object"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


# AIME: MathArena's JSONL, one problem a line; a folder means all its *.jsonl in name order.


def _aime_records(path: Path) -> Iterator[tuple[str, dict]]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: a folder without *.jsonl files")
    for file in files:
        for line_no, record in _jsonl_objects(file):
            yield f"{file}:{line_no}", record


def _aime_task(where: str, record: dict) -> Task:
    answer = _field(where, record, "answer", (int, str))
    problem = _field(where, record, "problem")
    return Task(str(_field(where, record, "id", (str, int))), problem, str(answer), "aime")


# HotpotQA: the distractor-setting JSON, one list of question records.


def _hotpotqa_records(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as err:
        raise InputError(f"{path}: not JSON ({err}); HotpotQA is one JSON list") from None
    if not isinstance(data, list):
        raise InputError(f"{path}: a JSON {type(data).__name__}, not HotpotQA's list of records")
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise InputError(f"{path}: record {index} is not a JSON object")
        yield index, record


def _hotpotqa_where(path: Path, index: int, record: dict) -> str:
    return f"{path}: record {index} (_id {record.get('_id')!r})"


def _paragraphs(path: Path, index: int, record: dict) -> list[tuple[str, list[str]]]:
    where = _hotpotqa_where(path, index, record)
    context = _field(where, record, "context", list)
    for n, paragraph in enumerate(context):
        if not (
            isinstance(paragraph, list)
            and len(paragraph) == 2
            and isinstance(paragraph[0], str)
            and isinstance(paragraph[1], list)
            and all(isinstance(s, str) for s in paragraph[1])
        ):
            raise InputError(f"{where}: context[{n}] is not [title, [sentences...]]")
    return [(title, sentences) for title, sentences in context]


def _hotpotqa_task(path: Path, index: int, record: dict, context_in_question: bool) -> Task:
    where = _hotpotqa_where(path, index, record)
    question = _field(where, record, "question")
    answer = _field(where, record, "answer")
    paragraphs = _paragraphs(path, index, record)
    text = question
    if context_in_question:
        shown = "\n\n".join(f"{t}: {''.join(s).strip()}" for t, s in paragraphs)
        text = f"{question}\n\nParagraphs:\n\n{shown}"
    task_id = str(_field(where, record, "_id"))
    return Task(task_id, f"{text}\n\n{HOTPOTQA_INSTRUCTION}", answer, "hotpotqa")


# BrowseComp-Plus: the decrypted JSONL (query_id, query, answer, evidence/gold/negative docs).


def _browsecomp_task(path: Path, line_no: int, record: dict) -> Task:
    where = f"{path}:{line_no}"
    query_id = str(_field(where, record, "query_id", (str, int)))
    where = f"{where} (query_id {query_id!r})"
    question = _field(where, record, "query")
    answer = _field(where, record, "answer")
    if _looks_encrypted(question):
        raise InputError(
            f"{where}: the query is still base64-obfuscated; decrypt the dataset first"
        )
    return Task(query_id, f"{question}\n\n{BROWSECOMP_INSTRUCTION}", answer, "browsecomp-plus")


def _looks_encrypted(text: str) -> bool:
    """The Hugging Face release obfuscates queries as base64 without spaces."""
    return len(text) > 40 and re.fullmatch(r"[A-Za-z0-9+/=]+", text.strip()) is not None


# GPQA: the official CSV; the four options shuffled per record, shown as (A)..(D).


def _gpqa_rows(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in GPQA_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: not the GPQA CSV: no column {', '.join(map(repr, missing))}")
        for n, row in enumerate(reader, 1):
            if None in row:  # more cells than the header has columns
                raise InputError(f"{path}: row {n} (line {reader.line_num}) has extra cells")
            yield n, row


def gpqa_options(row: dict, seed: int = 0) -> tuple[list[str], str]:
    """The four options of a GPQA row in the order shown, and the correct one's letter.
    The order depends only on `seed` and the row's `Record ID` (or question), so a run
    shows every question the same way on every machine."""
    options = [row[c].strip() for c in GPQA_COLUMNS[1:]]
    key = (row.get("Record ID") or "").strip() or row["Question"]
    order = list(range(4))
    random.Random(f"gpqa:{seed}:{key}").shuffle(order)
    return [options[i] for i in order], "ABCD"[order.index(0)]


def _gpqa_task(path: Path, n: int, row: dict, seed: int) -> Task:
    record_id = (row.get("Record ID") or "").strip()
    where = f"{path}: row {n}" + (f" (Record ID {record_id!r})" if record_id else "")
    for column in GPQA_COLUMNS:
        if not (row.get(column) or "").strip():
            raise InputError(f"{where}: column {column!r} is empty")
    options, letter = gpqa_options(row, seed)
    shown = "\n".join(f"({x}) {o}" for x, o in zip("ABCD", options, strict=True))
    question = f"{row['Question'].strip()}\n\n{shown}\n\n{GPQA_INSTRUCTION}"
    return Task(record_id or f"gpqa-{n}", question, letter, "gpqa")
