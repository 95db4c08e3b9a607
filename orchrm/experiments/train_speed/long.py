"""Pairs at the lengths of real orchestrations, for the training-speed comparison at the
paper's lengths (`benchmarks/rm_train.py --lengths mas`).

Real orchestrations of one batch differ in length several times over, and that spread
decides what padding costs. The lengths come from the published MAS-Orchestra records
(`mas_lengths`): each parsed record rendered whole as the reward model reads it
(`render_for_rm`, question then plan then thinking), counted by the backbone's own
tokenizer. Each text of a world pair is then given a length drawn from them, scaled so
that the longest record is `max_length` tokens (`stretch`): its own rendering first (the
part that tells chosen from rejected, cut to the drawn length when longer), then real
gpt-oss reasoning from the same records' thinking, from a random place, up to the
drawn length. Lengths, draws and places are pure functions of the seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from orchrm.errors import MissingInput
from orchrm.orchestration import render_for_rm
from orchrm.parse import ParseError, parse_record, read_records

WHOLE = 10**9
"""A rendering budget nothing reaches: a record rendered whole."""


def mas_records(data: Path) -> list[tuple[dict, object]]:
    """(record, orchestration) of every record of `data/*.jsonl` that parses."""
    files = sorted(Path(data).glob("*.jsonl"))
    if not files:
        raise MissingInput(f"{data}: no MAS-Orchestra record files (*.jsonl)")
    found = []
    for path in files:
        for _, record in read_records(path):
            try:
                found.append((record, parse_record(record)))
            except ParseError:
                continue
    return found


def mas_lengths(records: list[tuple[dict, object]], tokenizer) -> list[int]:
    """Tokens of each parsed record (`mas_records`) rendered whole as the reward model
    reads it, by `tokenizer` (its special tokens included), sorted."""
    texts = [render_for_rm(r.get("question") or "", o, WHOLE) for r, o in records]
    return sorted(len(ids) for ids in tokenizer(texts)["input_ids"])


def filler(records: list[tuple[dict, object]]) -> str:
    """The records' reasoning traces, one after another: what lengthens a text."""
    traces = [(r.get("thinking") or "").strip() for r, _ in records]
    return "\n\n".join(t for t in traces if t)


def scaled(lengths: list[int], max_length: int) -> list[int]:
    """`lengths` scaled so that the longest is `max_length` (each at least 2)."""
    top = max(lengths)
    return [max(2, round(n * max_length / top)) for n in lengths]


def stretch(records: list[dict], tokenizer, lengths: list[int], text: str, seed: int) -> list[dict]:
    """Each pair of `records` (export records: prompt, chosen, rejected) with each side
    made a text of a length drawn from `lengths`: its own rendering, then `text` from a
    random place, cut at a token end (`prompt` left empty, the text whole in `chosen`
    and `rejected`). A length is drawn for each distinct text, whichever side it is on:
    a plan in several pairs is one text of one length in all of them, as in real logs."""
    rng = random.Random(f"stretch:{seed}")
    ends = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = [end for _, end in ends["offset_mapping"]]
    special = tokenizer.num_special_tokens_to_add()
    made: dict[str, str] = {}

    def longer(own: str) -> str:
        target = rng.choice(lengths) - special
        marks = tokenizer(own, add_special_tokens=False, return_offsets_mapping=True)
        marks = [end for _, end in marks["offset_mapping"]]
        if len(marks) >= target:
            return own[: marks[target - 1]]
        own += "\nthinking: "
        need = target - len(marks) - 4  # (the joint tokenizes into a few tokens)
        start = rng.randrange(max(1, len(ends) - need))
        begin = ends[start - 1] if start else 0
        return own + text[begin : ends[min(len(ends), start + need) - 1]]

    out = []
    for r in records:
        sides = {}
        for side in ("chosen", "rejected"):
            own = r["prompt"] + r[side]
            if own not in made:
                made[own] = longer(own)
            sides[side] = made[own]
        out.append({**r, "prompt": "", **sides})
    return out
