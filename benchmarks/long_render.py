"""The reward-model rendering at 4k-16k tokens on the real MAS-Orchestra records.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/long_render.py [--budgets 4096,8192,16384]

Renders the cases of `orchrm.scoring.long_cases` (`--data`: the MAS-Orchestra record
files, by default the shared data folder beside the checkout), those
`tests/test_long_orchestrations.py` checks (every parsed record with a long thinking of
real gpt-oss reasoning traces, a chain of agents per task and per file, and one long
question) with `render_for_rm` at each budget, counted by the offline MiniLM's fast
tokenizer (`render_budget`: special tokens left out) and by characters. Prints, per
counter and budget: texts rendered a second (best of `--repeat` runs), tokens a second of
input, mean and max tokens before and after the cut, how many texts were cut, the share of
the thinking kept (its tokens after the cut over its tokens before, over all texts), and
how much text the counter was given to read over the texts' own length (the work, which
does not depend on the machine or its load).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError, MissingInput
from orchrm.scoring.long_cases import COUNTERS, long_cases, render_stats

MAS_ORCHESTRA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mas_orchestra"


@config(frozen=True)
class LongRenderSettings:
    """The run's options."""

    budgets: tuple[int, ...] = (4096, 8192, 16384)
    """Token budgets, comma-separated."""
    counters: tuple[Literal[COUNTERS], ...] = COUNTERS
    """What counts a text's size, comma-separated: minilm (its tokenizer), chars."""
    repeat: int = setting(3, min=1)
    """Timed runs; the best is kept."""
    data: str = str(MAS_ORCHESTRA)
    """The folder of the MAS-Orchestra record files."""

    def __post_init__(self) -> None:
        if not self.budgets or min(self.budgets) < 1:
            raise ConfigError(f"--budgets takes token counts of 1 or more, got {self.budgets}")
        if not self.counters:
            raise ConfigError("--counters names no counter")


LISTS = ("budgets", "counters")
"""The options given as one comma-separated text."""


def main(args: LongRenderSettings) -> None:
    """Render every case at each budget with each counter and print their figures."""
    if not Path(args.data).is_dir():
        raise MissingInput(f"--data {args.data}: no such folder of record files")
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import default_backbone

    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    cases = long_cases(Path(args.data))
    records = sum(c.record is not None for c in cases)
    n = len(cases)
    print(f"{n} texts: {records} records, {n - records} chains and questions")
    print(
        "| counter | budget | texts/s | input tokens/s | mean before | max before "
        "| mean after | max after | cut | thinking kept | text read |"
    )
    print("| --- |" + " ---: |" * 10)
    for name in args.counters:
        for budget in args.budgets:
            r = render_stats(cases, name, budget, tokenizer, args.repeat)
            before, after, best = r.before, r.after, r.seconds
            print(
                f"| {name} | {budget:,} | {n / best:.1f} | {sum(before) / best / 1000:,.0f}k "
                f"| {sum(before) / n:,.0f} | {max(before):,} | {sum(after) / n:,.0f} "
                f"| {max(after):,} | {r.cut} | {r.thinking_kept:.1%} | {r.text_read:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    listed = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(LongRenderSettings, main, doc=__doc__, settings=dict.fromkeys(LISTS, listed))
