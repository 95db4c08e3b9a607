"""Worst time of parsing, validation, rendering and answer extraction on hostile text.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/hostile_parse.py [--sizes 10000,100000,1000000]

Runs every generator of `orchrm.runtime.hostile`, those `tests/test_hostile_parse.py`
holds to linear time (long runs of each kind of whitespace after `${`, `<` and `Answer:`,
brackets, unclosed and repeated tags, deep nesting, lone surrogates, and orchestrations of
thousands of agents), at each size, once per stage, and prints for each stage and size the worst
time over the generators and which generator it was. A stage that raises anything but
`ParseError` stops the run.
"""

from __future__ import annotations

import argparse

from orchrm.runtime.hostile import GRAPH_GENERATORS, TEXT_GENERATORS, worst_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="10000,100000,1000000", help="characters, comma-separated"
    )
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    worst = worst_times(sizes)
    n_text, n_graph = len(TEXT_GENERATORS), len(GRAPH_GENERATORS)
    print(f"worst seconds over {n_text} hostile texts and {n_graph} orchestration shapes")
    print("| stage | " + " | ".join(f"{s:,} chars" for s in sizes) + " | worst at the largest |")
    print("| --- |" + " ---: |" * len(sizes) + " --- |")
    stages = dict.fromkeys(stage for stage, _ in worst)
    for stage in stages:
        cells = " | ".join(f"{worst[stage, s][0]:.3f}" for s in sizes)
        print(f"| {stage} | {cells} | {worst[stage, sizes[-1]][1]} |")


if __name__ == "__main__":
    main()
