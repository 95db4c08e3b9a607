"""Which pairs each optimizer step and each forward pass of reward-model training read.

An epoch is a list of steps per process; a step is a list of micro-batches (one forward
and backward pass each) whose gradients are accumulated before the optimizer steps.

- Without a token budget a micro-batch holds `batch_size` pairs and a step
  `grad_accumulation` micro-batches.
- With `max_tokens_per_batch` a step holds `batch_size x grad_accumulation` pairs (the
  same number of pairs per step either way), cut into micro-batches of similar length so
  that the padded tokens of one forward pass (2 texts x the longest text x pairs) stay
  within the budget. A pair alone over the budget forms its own micro-batch: it is never
  dropped, and its size is what the device has to hold.

Batches are drawn at random, as TRL's reward trainer draws them; with `group` above 1,
the pairs of that many batches are sorted together by their tokens (both texts), so each
batch holds pairs of similar length (less padding, but batches that are not a random
sample: docs/results.md#minilm). With `tasks` (each pair's task), batches are filled
with blocks of one task's pairs that share plans, so that a plan in several pairs of a
batch is computed once there (`orchrm.training.loss`), as InstructGPT trains on all the
comparisons of a prompt at once. Inside a micro-batch,
`text_passes` cuts the texts, longest first, into forward passes that each pad to their
own longest text. The order is a pure function of the seed and the epoch, so a resumed
run reads exactly the micro-batches an uninterrupted one would. Under several
processes every process runs the same number of micro-batches in a step (ZeRO-3 and
FSDP gather weights collectively in each forward pass): a process with fewer cuts its
micro-batches finer, and one with too few pairs to cut runs filler passes that weigh
nothing.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class MicroBatch:
    """One forward and backward pass: pair indices, and whether it only keeps processes
    in step (a filler repeats a pair and weighs 0 in the loss)."""

    pairs: tuple[int, ...]
    filler: bool = False


@dataclass(frozen=True)
class Step:
    """One optimizer step of one process: its micro-batches, accumulated."""

    micro_batches: tuple[MicroBatch, ...]

    @property
    def pairs(self) -> int:
        """Pairs that count in the loss (fillers excluded): each weighs 1 / pairs."""
        return sum(len(m.pairs) for m in self.micro_batches if not m.filler)


def length_grouped_batches(
    lengths: list[int], batch_size: int, seed: int, epoch: int, group: int = 1
) -> list[list[int]]:
    """Index batches: shuffled (by seed and epoch), then sorted by length inside chunks of
    `group` batches, so each batch holds similar lengths (group 1: random batches); batch
    order shuffled again."""
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = batch_size * group
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: -lengths[i])
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def task_batches(
    tasks: list[str], texts: list[tuple], batch_size: int, seed: int, epoch: int
) -> list[list[int]]:
    """Index batches of `batch_size` pairs filled task by task, so that their pairs share
    plans: each task's pairs (shuffled by seed and epoch) are cut into blocks of
    `batch_size` that hold as few distinct texts as `shared_blocks` finds (`texts`: each
    pair's two texts, any hashable keys); a full block is a batch, and the tasks' last,
    partial blocks are laid end to end in random order and cut into batches. Batches in
    random order; the last may hold fewer pairs."""
    rng = random.Random(f"{seed}:{epoch}:tasks")
    groups: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        groups.setdefault(task, []).append(i)
    full, rest = [], []
    for key in sorted(groups):
        members = groups[key]
        rng.shuffle(members)
        for block in shared_blocks(members, texts, batch_size):
            (full if len(block) == batch_size else rest).append(block)
    rng.shuffle(rest)
    order = [i for block in rest for i in block]
    batches = full + [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


SHARED_WINDOW = 64
"""Pairs `shared_blocks` looks ahead at to choose a block's next pair: linear time."""


def shared_blocks(pairs: list[int], texts: list[tuple], size: int) -> list[list[int]]:
    """`pairs` (one task's, in order) cut into blocks of `size`, greedily: a block starts
    with the first pair left, and each next pair is the first of the next
    `SHARED_WINDOW` left that brings the fewest texts the block does not hold yet (a
    task's 2 winners and 2 losers make 4 pairs of 4 texts)."""
    left, blocks = deque(pairs), []
    while left:
        block = [left.popleft()]
        held = set(texts[block[0]])
        while len(block) < size and left:
            window = itertools.islice(left, SHARED_WINDOW)
            k = min(enumerate(window), key=lambda e: (len(set(texts[e[1]]) - held), e[0]))[0]
            block.append(left[k])
            del left[k]
            held.update(texts[block[-1]])
        blocks.append(block)
    return blocks


def padded_tokens(pairs: list[int] | tuple[int, ...], widths: list[int]) -> int:
    """Tokens of one forward pass over `pairs`: both texts of each, padded to the longest."""
    return 2 * len(pairs) * max(widths[i] for i in pairs) if pairs else 0


def text_passes(lengths: list[int], passes: int, join: bool = True) -> list[list[int]]:
    """The texts of one micro-batch (their token counts) as at most `passes` forward
    passes of as even a size as they divide into, longest texts first, so each pass pads
    to its own longest text. With `join`, a pass whose longest text is as long as the
    longest of the pass before joins it: cutting there saves no padding and costs a pass
    (processes that must run as many passes as each other keep every cut)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    count = min(passes, len(order))
    cuts, start = [], 0
    for k in range(count):
        end = start + len(order) // count + (k < len(order) % count)
        if join and cuts and lengths[order[start]] == lengths[cuts[-1][0]]:
            cuts[-1] += order[start:end]
        else:
            cuts.append(order[start:end])
        start = end
    return cuts


def passes_padded_tokens(lengths: list[int], passes: int, join: bool = True) -> int:
    """Tokens the forward passes of `text_passes` read, padding included."""
    cuts = text_passes(lengths, passes, join)
    return sum(len(c) * max(lengths[i] for i in c) for c in cuts)


def split_by_tokens(pairs: list[int], widths: list[int], max_tokens: int) -> list[list[int]]:
    """`pairs` cut into micro-batches, widest first, each as many pairs as fit
    `max_tokens` padded tokens; a pair that alone exceeds it is a micro-batch of one."""
    ordered = sorted(pairs, key=lambda i: (-widths[i], i))
    parts: list[list[int]] = []
    for i in ordered:
        # Widest first: a part's first pair sets the width every later one pads to.
        if parts and 2 * (len(parts[-1]) + 1) * widths[parts[-1][0]] <= max_tokens:
            parts[-1].append(i)
        else:
            parts.append([i])
    return parts


def cut_to(parts: list[list[int]], count: int, widths: list[int]) -> list[MicroBatch]:
    """`parts` as exactly `count` micro-batches (count >= len(parts)): the part with the
    most padded tokens is halved until there are enough, and when no part has two pairs
    left, filler passes repeat the narrowest pair."""
    parts = [list(p) for p in parts]
    while len(parts) < count:
        splittable = [k for k, p in enumerate(parts) if len(p) > 1]
        if not splittable:
            break
        k = max(splittable, key=lambda k: (padded_tokens(parts[k], widths), -k))
        half = (len(parts[k]) + 1) // 2
        parts[k : k + 1] = [parts[k][:half], parts[k][half:]]
    batches = [MicroBatch(tuple(p)) for p in parts]
    if len(batches) < count:
        narrowest = min((i for p in parts for i in p), key=lambda i: (widths[i], i))
        batches += [MicroBatch((narrowest,), filler=True)] * (count - len(batches))
    return batches


def epoch_steps(
    widths: list[int],
    *,
    lengths: list[int] | None = None,
    batch_size: int,
    grad_accumulation: int,
    max_tokens: int | None,
    seed: int,
    epoch: int,
    group: int = 1,
    processes: int = 1,
    rank: int = 0,
    tasks: list[str] | None = None,
    texts: list[tuple] | None = None,
) -> list[Step]:
    """The steps process `rank` of `processes` runs in `epoch` (see the module docstring).
    `widths` (the longer text of each pair) is what a pass pads to; `lengths` (both texts'
    tokens) is what `group` batches are sorted by, None: `widths`; `tasks` and `texts`
    (each pair's task and two texts, given together): batches filled task by task
    (`task_batches`; `group` must then be 1). Every process gets the same number of
    steps; batches left over are skipped this epoch (the next epoch's order differs)."""
    key = widths if lengths is None else lengths
    if tasks is not None and group != 1:
        raise ValueError("batches are filled by task or sorted by length, not both")
    if (tasks is None) != (texts is None):
        raise ValueError("batches filled by task need both each pair's task and its texts")

    def draw(size: int) -> list[list[int]]:
        if tasks is not None:
            return task_batches(tasks, texts, size, seed, epoch)
        return length_grouped_batches(key, size, seed, epoch, group)

    if max_tokens is None:
        batches = draw(batch_size)
        mine = batches[rank::processes][: len(batches) // processes]
        chunks = [mine[s : s + grad_accumulation] for s in range(0, len(mine), grad_accumulation)]
        return [Step(tuple(MicroBatch(tuple(b)) for b in chunk)) for chunk in chunks]
    batches = draw(batch_size * grad_accumulation)
    steps = []
    for s in range(len(batches) // processes):
        cuts = [
            split_by_tokens(batches[s * processes + r], widths, max_tokens)
            for r in range(processes)
        ]
        count = max(len(c) for c in cuts)
        steps.append(Step(tuple(cut_to(cuts[rank], count, widths))))
    return steps


def steps_done(steps: list[Step], micro_batches: int) -> int:
    """How many whole steps `micro_batches` forward passes into an epoch complete (a
    checkpoint is only ever written at the end of a step)."""
    done = 0
    for n, step in enumerate(steps):
        if done >= micro_batches:
            return n
        done += len(step.micro_batches)
    return len(steps)
