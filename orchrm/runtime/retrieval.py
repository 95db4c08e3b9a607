"""Retrievers for the web-search sub-agent: a protocol, and a local BM25 corpus as the default.

A corpus file is JSONL with `id` (or `docid`, as BrowseComp-Plus's corpus names it),
`text` and optionally `title` (else `url`). Any object with a
`search(query, k)` method returning `Document`s plugs in (a web search API, a dense
index, ...).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchrm.errors import InputError
from orchrm.jsonl import read_jsonl

_WORD_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class Document:
    """One search result."""

    id: str
    text: str
    title: str = ""
    score: float = 0.0


class Retriever(Protocol):
    """Anything the web-search sub-agent can search."""

    def search(self, query: str, k: int) -> list[Document]:
        """The best `k` documents for `query`, best first."""
        ...


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens, the unit BM25 counts."""
    return _WORD_RE.findall(text.lower())


class BM25Retriever:
    """Okapi BM25 over an in-memory corpus (k1=1.5, b=0.75 by default)."""

    def __init__(self, documents: list[Document], k1: float = 1.5, b: float = 0.75):
        self.documents = documents
        self.k1, self.b = k1, b
        self._terms = [Counter(tokenize(f"{d.title} {d.text}")) for d in documents]
        self._lengths = [sum(t.values()) for t in self._terms]
        self._avg_length = sum(self._lengths) / len(documents) if documents else 0.0
        df = Counter(term for terms in self._terms for term in terms)
        n = len(documents)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def search(self, query: str, k: int) -> list[Document]:
        """The top `k` documents by BM25 score (ties in corpus order); none scoring 0."""
        query_terms = tokenize(query)
        scored = []
        for i, terms in enumerate(self._terms):
            norm = self.k1 * (1 - self.b + self.b * self._lengths[i] / (self._avg_length or 1))
            score = sum(
                self._idf.get(t, 0.0) * terms[t] * (self.k1 + 1) / (terms[t] + norm)
                for t in query_terms
                if t in terms
            )
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [
            Document(self.documents[i].id, self.documents[i].text, self.documents[i].title, -s)
            for s, i in scored[:k]
        ]


def load_corpus(path: str | Path) -> BM25Retriever:
    """A BM25 retriever over a JSONL corpus (`id` or `docid`, `text`, optional `title`
    or `url`). A line that is not such a record raises ValueError naming the file and
    line."""
    documents = []
    for line_no, record in read_jsonl(path):
        try:
            doc_id = record["id"] if "id" in record else record["docid"]
            title = record.get("title") or record.get("url") or ""
            documents.append(Document(str(doc_id), str(record["text"]), str(title)))
        except (KeyError, TypeError, AttributeError) as err:
            raise InputError(f"{path}:{line_no}: not a corpus record ({err!r})") from None
    return BM25Retriever(documents)
