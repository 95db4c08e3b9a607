"""Preference pairs for the reward model: loading, tokenizing, padding into tensors.

Each pair becomes two token sequences, `prompt + chosen` and `prompt + rejected`: exactly
the text `render_for_rm` gives (the export wrote it that way). Which pairs go together
in a batch is `orchrm.training.batching`'s.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from orchrm.errors import InputError
from orchrm.jsonl import read_jsonl
from orchrm.orchestration import replace_surrogates

REQUIRED = ("prompt", "chosen", "rejected")


@dataclass
class Pairs:
    """Tokenized pairs: ids of each side, and what each pair is (kind, domain, task: its
    `task_id`, else its prompt)."""

    chosen: list[list[int]]
    rejected: list[list[int]]
    kinds: list[str]
    domains: list[str]
    tasks: list[str]
    margins: list[float]
    weights: list[float] | None = None
    """Each pair's `weight`, the probability that its chosen side is the better one (1
    where the file has none); None: all 1."""
    truncated: int = 0
    """Texts longer than `max_length` tokens, cut from the end (counted, not dropped)."""

    def __len__(self) -> int:
        return len(self.chosen)

    def widths(self) -> list[int]:
        """Tokens of the longer text of each pair: what it pads a batch to."""
        return [max(len(c), len(r)) for c, r in zip(self.chosen, self.rejected, strict=True)]

    def lengths(self) -> list[int]:
        """Tokens of both texts of each pair: what sorted batches are sorted by."""
        return [len(c) + len(r) for c, r in zip(self.chosen, self.rejected, strict=True)]


def read_pair_file(path: str | Path) -> list[dict]:
    """Records of one exported file (`.jsonl` or `.parquet`); a record without
    prompt/chosen/rejected strings raises ValueError naming the file and line."""
    path = Path(path)
    if path.suffix == ".parquet":
        rows = list(enumerate(pq.read_table(path).to_pylist(), 1))
    else:
        rows = list(read_jsonl(path))
    for line, r in rows:
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in REQUIRED):
            raise InputError(f"{path}:{line}: a pair needs string prompt, chosen and rejected")
        weight = r.get("weight")
        if weight is not None and not (
            isinstance(weight, int | float) and not isinstance(weight, bool) and 0 <= weight <= 1
        ):
            raise InputError(f"{path}:{line}: a pair's weight must be a number from 0 to 1")
    return [r for _, r in rows]


def load_splits(
    source: str | Path, validation_share: float = 0.1, seed: int = 0
) -> tuple[list[dict], list[dict]]:
    """(train, validation) records from an export folder (train.* and validation.*) or
    from one file, whose tasks are then split `validation_share` to validation."""
    source = Path(source)
    if source.is_dir():
        found = {}
        for split in ("train", "validation"):
            files = [source / f"{split}.{ext}" for ext in ("jsonl", "parquet")]
            existing = [f for f in files if f.exists()]
            found[split] = read_pair_file(existing[0]) if existing else []
            if split == "train" and not existing:
                raise InputError(f"{source} has no train.jsonl or train.parquet")
            if split == "train" and not found[split]:
                raise InputError(_NO_PAIRS.format(existing[0]))
        return found["train"], found["validation"]
    records = read_pair_file(source)
    if not records:
        raise InputError(_NO_PAIRS.format(source))

    def held_out(r: dict) -> bool:
        key = f"{seed}:{r.get('task_id', r['prompt'])}".encode()
        return int(hashlib.md5(key).hexdigest()[:8], 16) / 2**32 < validation_share

    train = [r for r in records if not held_out(r)]
    if not train:
        raise InputError(
            f"{source}: all {len(records)} pair(s) fell to validation (validation_share "
            f"{validation_share}): give more pairs or a smaller --validation-share"
        )
    return train, [r for r in records if held_out(r)]


_NO_PAIRS = (
    "{} holds no pairs: give a file of prompt/chosen/rejected records (`orchrm pairs "
    "export` writes them from mined pairs)"
)


def bootstrap(records: list[dict], seed: int) -> list[dict]:
    """A draw with replacement of the tasks of `records` (as many draws as tasks), each
    drawn task with all its pairs; a record without `task_id` is a task of its own."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(str(r.get("task_id") or r["prompt"]), []).append(r)
    keys = sorted(groups)
    rng = random.Random(f"bootstrap:{seed}")
    return [r for _ in keys for r in groups[rng.choice(keys)]]


def data_hash(records: list[dict]) -> str:
    """A fingerprint of pair texts, stored in checkpoints (which data made this model)."""
    digest = hashlib.sha256()
    for r in records:
        digest.update(json.dumps([r["prompt"], r["chosen"], r["rejected"]]).encode())
    return digest.hexdigest()[:16]


def pair_task(record: dict) -> str:
    """The task a pair record belongs to: its `task_id`, else its prompt."""
    return str(record.get("task_id") or record["prompt"])


def pair_texts(record: dict) -> tuple[str, str]:
    """A pair record's two texts as the reward model reads them: prompt + chosen, prompt
    + rejected (which pairs share a plan)."""
    return record["prompt"] + record["chosen"], record["prompt"] + record["rejected"]


def tokenize(records: list[dict], tokenizer, max_length: int) -> Pairs:
    """Token ids of both sides of every pair (fast tokenizer, batched)."""
    # A pair file may hold lone surrogates (JSON can escape them); tokenizers reject them.
    sides = [pair_texts(r) for r in records]
    texts = [replace_surrogates(c) for c, _ in sides] + [replace_surrogates(r) for _, r in sides]
    # (fast tokenizers fail on an empty batch: an export without a validation split)
    full = tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"] if texts else []
    truncated = sum(len(ids) > max_length for ids in full)
    ids = [_truncate(x, max_length, tokenizer) for x in full]
    n = len(records)
    return Pairs(
        chosen=ids[:n],
        rejected=ids[n:],
        kinds=[str(r.get("kind", "")) for r in records],
        domains=[str(r.get("domain", "")) for r in records],
        tasks=[pair_task(r) for r in records],
        margins=[float(r.get("margin") or 0.0) for r in records],
        weights=[1.0 if r.get("weight") is None else float(r["weight"]) for r in records],
        truncated=truncated,
    )


def _truncate(ids: list[int], max_length: int, tokenizer) -> list[int]:
    if len(ids) <= max_length:
        return ids
    # Keep the end-of-sequence token when the tokenizer adds one (BERT's [SEP]).
    last = ids[-1] if ids[-1] in (tokenizer.sep_token_id, tokenizer.eos_token_id) else None
    return [*ids[: max_length - 1], last] if last is not None else ids[:max_length]
