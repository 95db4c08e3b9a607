"""BrowseComp-Plus (`browsecomp-plus`): the decrypted JSONL, `query_id`, `query`, `answer`
and the `evidence_docs`/`gold_docs`/`negative_docs` lists, which pool into the search
corpus; short-answer match (`browsecomp_correct`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from orchrm.errors import InputError
from orchrm.runtime.retrieval import Document
from orchrm.tasks.answers import is_correct, normalize_text
from orchrm.tasks.benchmarks.base import Benchmark, jsonl_objects, required
from orchrm.tasks.task import Task

INSTRUCTION = "Give the exact answer as a short phrase."
DOCUMENT_FIELDS = ("evidence_docs", "gold_docs", "negative_docs")


def load(path: Path, seed: int = 0, context: str = "question") -> Iterator[Task]:
    """The queries of `path` in file order (`seed` and `context` do not apply)."""
    for line_no, record in jsonl_objects(path):
        yield _task(path, line_no, record)


def documents(path: Path, limit: int | None, context: str = "question") -> list[Document]:
    """The evidence, gold and negative documents of the first `limit` queries, each
    `docid` once."""
    docs: dict[str, Document] = {}
    for n, (line_no, record) in enumerate(jsonl_objects(path)):
        if limit is not None and n >= limit:
            break
        for field in DOCUMENT_FIELDS:
            for doc in record.get(field) or []:
                if not isinstance(doc, dict) or "docid" not in doc or "text" not in doc:
                    raise InputError(f"{path}:{line_no}: {field} entry without docid/text")
                docid, url = str(doc["docid"]), str(doc.get("url") or "")
                docs.setdefault(docid, Document(docid, str(doc["text"]), url))
    return list(docs.values())


def _task(path: Path, line_no: int, record: dict) -> Task:
    where = f"{path}:{line_no}"
    query_id = str(required(where, record, "query_id", (str, int)))
    where = f"{where} (query_id {query_id!r})"
    question = required(where, record, "query")
    answer = required(where, record, "answer")
    if _looks_encrypted(question):
        raise InputError(
            f"{where}: the query is still base64-obfuscated; decrypt the dataset first"
        )
    return Task(query_id, f"{question}\n\n{INSTRUCTION}", answer, "browsecomp-plus")


def _looks_encrypted(text: str) -> bool:
    """The Hugging Face release obfuscates queries as base64 without spaces."""
    return len(text) > 40 and re.fullmatch(r"[A-Za-z0-9+/=]+", text.strip()) is not None


def browsecomp_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """BrowseComp-Plus short answers: `is_correct` (numbers exactly, text normalized), or
    the normalized gold as a whole-word phrase inside a short prediction (at most 3x the
    gold's words + 5: "Frida Kahlo, the painter" for "Frida Kahlo") that offers no
    alternative (no "or" the gold lacks).
    The official benchmark grades with an LLM judge (gpt-4.1); this rule is offline and
    stricter on paraphrases, so its accuracy is a lower bound of the judge's."""
    plain = is_correct(answer, truth)
    if plain is not False or answer is None:
        return plain
    pred, gold = normalize_text(str(answer)).split(), normalize_text(str(truth)).split()
    if not gold or len(pred) > 3 * len(gold) + 5:
        return False
    if "or" in pred and "or" not in gold:
        return False
    n = len(gold)
    return any(pred[i : i + n] == gold for i in range(len(pred) - n + 1))


BENCHMARK = Benchmark("browsecomp-plus", load, browsecomp_correct, documents)
