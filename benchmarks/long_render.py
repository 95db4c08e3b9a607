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

import argparse
from pathlib import Path

from orchrm.scoring.long_cases import COUNTERS, long_cases, render_stats

MAS_ORCHESTRA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mas_orchestra"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="4096,8192,16384", help="comma-separated")
    parser.add_argument("--counters", default=",".join(COUNTERS), help="minilm, chars")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is kept")
    parser.add_argument("--data", type=Path, default=MAS_ORCHESTRA, help="the record files")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from orchrm.rmodel.backbone import default_backbone

    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    cases = long_cases(args.data)
    records = sum(c.record is not None for c in cases)
    n = len(cases)
    print(f"{n} texts: {records} records, {n - records} chains and questions")
    print(
        "| counter | budget | texts/s | input tokens/s | mean before | max before "
        "| mean after | max after | cut | thinking kept | text read |"
    )
    print("| --- |" + " ---: |" * 10)
    for name in args.counters.split(","):
        for budget in (int(b) for b in args.budgets.split(",")):
            r = render_stats(cases, name, budget, tokenizer, args.repeat)
            before, after, best = r.before, r.after, r.seconds
            print(
                f"| {name} | {budget:,} | {n / best:.1f} | {sum(before) / best / 1000:,.0f}k "
                f"| {sum(before) / n:,.0f} | {max(before):,} | {sum(after) / n:,.0f} "
                f"| {max(after):,} | {r.cut} | {r.thinking_kept:.1%} | {r.text_read:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
