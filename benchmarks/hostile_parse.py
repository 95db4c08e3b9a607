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

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config
from orchrm.errors import ConfigError
from orchrm.runtime.hostile import GRAPH_GENERATORS, TEXT_GENERATORS, worst_times


@config(frozen=True)
class HostileSettings:
    """The run's options."""

    sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    """Characters of each hostile text, comma-separated."""

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 1:
            raise ConfigError(f"--sizes takes character counts of 1 or more, got {self.sizes}")


def main(settings: HostileSettings) -> None:
    """Time every stage on every generator at each size and print the worst."""
    sizes = list(settings.sizes)
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
    listed = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(HostileSettings, main, doc=__doc__, settings={"sizes": listed})
