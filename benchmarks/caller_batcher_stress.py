"""Poisoned calls among clean ones: does a `CallerBatcher` keep each error to its call?

Many threads call one batcher; some calls hold an item that makes the scorer raise, and
each scoring round sleeps a few milliseconds. Every clean call should get exactly its
one-at-a-time results and every poisoned call its own error, as an exception object no
other thread raised.

    .venv/bin/python benchmarks/caller_batcher_stress.py
    .venv/bin/python benchmarks/caller_batcher_stress.py --callers /tmp/callers_before.py

`--callers` loads `CallerBatcher` from another copy of `orchrm/scoring/callers.py` (an
older version, to compare).
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from orchrm.cli.script import run_script
from orchrm.configs import config, setting

POISON = -1


class Poisoned(ValueError):
    """What the scorer raises for a round holding the poisoned item."""


def load_batcher(path: str | None) -> type:
    """`CallerBatcher` from orchrm, or from the file at `path`."""
    if path is None:
        from orchrm.scoring.callers import CallerBatcher

        return CallerBatcher
    spec = importlib.util.spec_from_file_location("callers_under_test", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses
    spec.loader.exec_module(module)
    return module.CallerBatcher


@config(frozen=True)
class StressSettings:
    """The stress's options."""

    calls: int = setting(2000, min=1)
    """Calls in all."""
    threads: int = setting(32, min=1)
    """Threads calling at once."""
    poisoned: int = setting(200, min=0)
    """Calls with a bad item."""
    round_ms: float = setting(2.0, min=0.0)
    """Time of one scoring round, in milliseconds."""
    seed: int = 0
    """Seed of the calls and of which are poisoned."""
    callers: str | None = None
    """A callers.py to load CallerBatcher from (default: orchrm's)."""

    def __post_init__(self) -> None:
        if self.poisoned > self.calls:
            from orchrm.errors import ConfigError

            raise ConfigError(f"--poisoned {self.poisoned} is more than --calls {self.calls}")


def main(args: StressSettings) -> None:
    """Run the stress and print its figures."""

    def run(items: list[int]) -> list[int]:
        time.sleep(args.round_ms / 1000)
        if POISON in items:
            raise Poisoned("a poisoned item")
        return [2 * i for i in items]

    rng = random.Random(args.seed)
    calls = [[rng.randrange(1000) for _ in range(rng.randint(1, 4))] for _ in range(args.calls)]
    for n in rng.sample(range(args.calls), args.poisoned):
        calls[n][rng.randrange(len(calls[n]))] = POISON
    batcher = load_batcher(args.callers)(run)

    def outcome(items: list[int]) -> list[int] | BaseException:
        try:
            return batcher(items)
        except Exception as err:
            return err

    start = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        outcomes = list(pool.map(outcome, calls))
    wall = time.perf_counter() - start

    clean = [(c, o) for c, o in zip(calls, outcomes, strict=True) if POISON not in c]
    poisoned = [o for c, o in zip(calls, outcomes, strict=True) if POISON in c]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    failed = sum(isinstance(o, BaseException) for _, o in clean)
    wrong = sum(not isinstance(o, BaseException) and o != [2 * i for i in c] for c, o in clean)
    print(f"calls: {args.calls} from {args.threads} threads, {args.poisoned} poisoned")
    print(f"rounds of {args.round_ms:g} ms: {batcher.rounds} (largest {batcher.largest_round})")
    print(f"clean calls failed: {failed} of {len(clean)} (answered wrong: {wrong})")
    print(f"poisoned calls with their error: {sum(isinstance(o, Poisoned) for o in poisoned)}")
    print(f"distinct exception objects: {len({id(e) for e in errors})} of {len(errors)} raised")
    print(f"wall time: {wall:.2f} s")


if __name__ == "__main__":
    run_script(StressSettings, main, doc=__doc__)
