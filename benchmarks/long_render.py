"""The reward-model rendering at 4k-16k tokens on the real MAS-Orchestra records.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/long_render.py [--budgets 4096,8192,16384]

Renders the cases of `long_cases.py`, those `tests/test_long_orchestrations.py` checks
(every parsed record with a long thinking of real gpt-oss reasoning traces, a chain of
agents per task and per file, and one long question) with `render_for_rm` at each budget,
counted by the offline MiniLM's fast tokenizer (`render_budget`: special tokens left out)
and by characters. Prints, per counter and budget: texts rendered a second (best of
`--repeat` runs), tokens a second of input, mean and max tokens before and after the cut,
how many texts were cut, the share of the thinking kept (its tokens after the cut over its
tokens before, over all texts), and how much text the counter was given to read over the
texts' own length (the work, which does not depend on the machine or its load).
"""

from __future__ import annotations

import argparse
import time

from long_cases import COUNTERS, LongCase, budget_of, count_many, full_text
from long_cases import long_cases as build_cases


def thinking_of(text: str) -> str:
    """The thinking a rendered text keeps, without the " ..." that marks a cut."""
    last = text.rsplit("\n", 1)[-1]
    if not last.startswith("thinking: "):
        return ""
    body = last[len("thinking: ") :]
    return "" if body == "..." else body.removesuffix(" ...")


class Reading:
    """A counter that adds up the characters it is given, with token ends when the
    counter it wraps has them (so `render_for_rm` takes the same path)."""

    def __init__(self, count) -> None:
        self.count, self.chars = count, 0
        if hasattr(count, "token_ends"):
            self.token_ends = self._token_ends

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.count(text)

    def _token_ends(self, text: str) -> list[int]:
        self.chars += len(text)
        return self.count.token_ends(text)


def best_time(run, repeat: int) -> tuple[float, object]:
    """(best seconds over `repeat` runs, the last run's result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def render_row(cases: list[LongCase], name: str, budget: int, tokenizer, repeat: int) -> str:
    """One table row: counter `name` at `budget`."""
    from orchrm.orchestration import render_for_rm

    max_tokens, count = budget_of(name, budget, tokenizer)
    best, texts = best_time(
        lambda: [render_for_rm(c.question, c.orchestration, max_tokens, count) for c in cases],
        repeat,
    )
    fulls = [full_text(c) for c in cases]
    reading = Reading(count)
    for c in cases:
        render_for_rm(c.question, c.orchestration, max_tokens, reading)
    ratio = f"{reading.chars / sum(map(len, fulls)):.2f}x"
    before, after = count_many(name, fulls, tokenizer), count_many(name, texts, tokenizer)
    kept = sum(count_many(name, [thinking_of(t) for t in texts], tokenizer))
    whole = sum(count_many(name, [thinking_of(t) for t in fulls], tokenizer))
    cut = sum(t != f for t, f in zip(texts, fulls, strict=True))
    n = len(cases)
    return (
        f"| {name} | {budget:,} | {n / best:.1f} | {sum(before) / best / 1000:,.0f}k "
        f"| {sum(before) / n:,.0f} | {max(before):,} | {sum(after) / n:,.0f} | {max(after):,} "
        f"| {cut} | {kept / whole:.1%} | {ratio} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="4096,8192,16384", help="comma-separated")
    parser.add_argument("--counters", default=",".join(COUNTERS), help="minilm, chars")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is kept")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from orchrm.scoring.backbone import default_backbone

    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    cases = build_cases()
    records = sum(c.record is not None for c in cases)
    print(f"{len(cases)} texts: {records} records, {len(cases) - records} chains and questions")
    print(
        "| counter | budget | texts/s | input tokens/s | mean before | max before "
        "| mean after | max after | cut | thinking kept | text read |"
    )
    print("| --- |" + " ---: |" * 10)
    for name in args.counters.split(","):
        for budget in (int(b) for b in args.budgets.split(",")):
            print(render_row(cases, name, budget, tokenizer, args.repeat), flush=True)


if __name__ == "__main__":
    main()
