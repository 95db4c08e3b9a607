"""World tasks: domain presets, hidden attributes, and the question text users see.

Each task carries hidden attributes that decide which orchestrations succeed: how hard it
is (`skill`), which sub-agent types suit it (`affinity`), whether splitting it into
sub-tasks helps (`decomposition`), which expertise a debate needs (`topic`), how reliable
a critic is on it (`checkable`), how many facts must be searched for (`hops`). The
question text leaks some of them through cue phrases, each only with some probability, so
predicting success takes reading the question and the orchestration together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from orchrm.orchestration import AGENT_REGISTRY, AGENT_TYPES


@dataclass(frozen=True, kw_only=True)
class Preset:
    """How tasks of one domain are drawn. Logit-scale numbers shift a call's log-odds of
    being correct; the `*_sd` spreads decide how much the orchestration matters. The
    defaults are a domain that needs no search, so a preset states what sets it apart."""

    name: str
    skill_mean: float
    """Mean log-odds that one chain-of-thought call on the whole task is right."""
    skill_sd: float
    affinity_sd: float
    """Spread of each sub-agent type's task-specific shift."""
    best_type_boost: float
    """Extra shift of one sub-agent type per task: the type that suits it."""
    decomposition_mean: float = 0.0
    decomposition_sd: float
    role_gain: tuple[float, float]
    """Range of the shift a debate gains with roles matching the topic (loses half of
    it without)."""
    distractor_top: tuple[float, float] = (0.6, 0.9)
    """Range of the share of wrong answers that land on the main distractor."""
    hops: tuple[int, int] = (0, 0)
    """Range of facts a task needs found by search (0: none)."""
    search_rate: tuple[float, float] = (0.0, 0.0)
    """Range of the chance that one search turn finds the next needed fact."""
    cue_rate: float = 0.6
    """Chance that each hidden attribute shows in the question text."""
    answer_kind: str = "integer"
    """`integer` (AIME-like), `name` (search, multi-hop QA) or `choice` (A-D)."""
    checkable: tuple[float, float] = (0.0, 1.0)
    """Range of how well a critic spots a wrong answer (knowledge gaps are not spotted)."""
    known_rate: float | None = None
    """Knowledge-bound domains: the share of tasks the sub-agent model knows. A known
    task's log-odds are `skill_mean` above 0, an unknown one's as far below (its errors
    are systematic, so every orchestration fails alike). None: one normal distribution."""


_MULTIHOP = Preset(
    name="multihop",
    skill_mean=3.5,
    skill_sd=0.5,
    affinity_sd=0.1,
    best_type_boost=0.1,
    decomposition_sd=0.1,
    role_gain=(0.0, 0.1),
    answer_kind="name",
    checkable=(0.0, 0.1),
    known_rate=0.45,
)

PRESETS: dict[str, Preset] = {
    # AIME-like: hard (one chain-of-thought call solves about one task in five), and the
    # right orchestration matters a lot. On hard tasks wrong answers outnumber right
    # ones, so a vote often lands on the main distractor; picking the plan that suits
    # the task is what helps.
    "math": Preset(
        name="math",
        skill_mean=-1.5,
        skill_sd=1.1,
        affinity_sd=1.0,
        best_type_boost=3.0,
        decomposition_sd=1.1,
        role_gain=(0.8, 2.0),
    ),
    # BrowseComp+-like: most tasks need facts found over several hops; hard.
    "search": Preset(
        name="search",
        skill_mean=-0.6,
        skill_sd=0.8,
        affinity_sd=0.7,
        best_type_boost=1.2,
        decomposition_mean=0.6,
        decomposition_sd=0.8,
        role_gain=(0.3, 1.0),
        distractor_top=(0.5, 0.85),
        hops=(0, 3),
        search_rate=(0.25, 0.6),
        answer_kind="name",
        checkable=(0.0, 0.6),
    ),
    # HotpotQA-like: the model knows the facts or not; orchestrations vary little.
    "multihop": _MULTIHOP,
    # GPQA-like: knowledge-bound; the orchestration matters little.
    "science": replace(_MULTIHOP, name="science", answer_kind="choice", known_rate=0.6),
}

TOPICS: dict[str, dict] = {
    "geometry": {
        "experts": ("geometer", "geometry"),
        "words": ("triangle", "circle", "inscribed angle", "polygon"),
    },
    "number theory": {
        "experts": ("number theorist", "number theory"),
        "words": ("divisible", "prime", "remainder", "digit sum"),
    },
    "combinatorics": {
        "experts": ("combinatorialist", "combinatorics", "counting"),
        "words": ("arrangements", "ways to choose", "lattice paths", "seatings"),
    },
    "algebra": {
        "experts": ("algebraist", "algebra"),
        "words": ("polynomial", "real roots", "system of equations", "functional equation"),
    },
}
"""Expertise areas: a debate whose roles name one of `experts` matches the topic."""


TYPE_CUES: dict[str, tuple[str, ...]] = {name: kind.cues for name, kind in AGENT_REGISTRY.items()}
"""Each registered type's `cues` (its registry entry's): the phrases that hint at it in a
question."""
_NOT_SEARCHING = tuple(t for t in AGENT_TYPES if not AGENT_REGISTRY[t].searches)


def hinted_type(question: str) -> str | None:
    """The sub-agent type a `TYPE_CUES` phrase in `question` hints at, or None."""
    return next((t for t, cues in TYPE_CUES.items() if any(c in question for c in cues)), None)


SPLIT_CUES = ("Work in stages.", "First set up the quantities, then solve.")
WHOLE_CUES = ("Treat it as a whole.", "The parts are tightly coupled.")

_SYLLABLES = ("ka", "lo", "mi", "ra", "ven", "tor", "sa", "qu", "el", "dan", "or", "is", "mar")


@dataclass(frozen=True)
class WorldTask:
    """One task with its ground truth and hidden attributes (see module docstring)."""

    id: str
    domain: str
    question: str
    answer: str
    distractors: tuple[str, ...]
    distractor_weights: tuple[float, ...]
    skill: float
    affinity: dict[str, float] = field(hash=False)
    decomposition: float = 0.0
    topic: str = ""
    role_gain: float = 0.0
    checkable: float = 0.5
    hops: int = 0
    hop_entities: tuple[str, ...] = ()
    search_rate: float = 0.0
    best_type: str = ""

    def to_dict(self) -> dict:
        """JSON-ready form, hidden attributes included (the world's ground truth)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict) -> WorldTask:
        """The inverse of `to_dict` (as written to PRESET.tasks.jsonl)."""
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()})


def generate_tasks(preset: str | Preset, n: int, seed: int = 0) -> list[WorldTask]:
    """`n` tasks of a preset, deterministic for `seed`."""
    p = PRESETS[preset] if isinstance(preset, str) else preset
    rng = random.Random(f"{p.name}:{seed}")
    return [_task(p, i, rng, seed) for i in range(n)]


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _task(p: Preset, i: int, rng: random.Random, seed: int) -> WorldTask:
    hops = rng.randint(*p.hops)
    best = rng.choice(AGENT_TYPES if hops else _NOT_SEARCHING)
    affinity = {
        t: rng.gauss(0, p.affinity_sd) + (p.best_type_boost if t == best else 0.0)
        for t in AGENT_TYPES
    }
    if not hops:  # nothing to look up
        for t in AGENT_TYPES:
            if AGENT_REGISTRY[t].searches:
                affinity[t] -= abs(rng.gauss(0, p.affinity_sd))
    topic = rng.choice(sorted(TOPICS))
    decomposition = rng.gauss(p.decomposition_mean, p.decomposition_sd)
    if p.known_rate is None:
        skill = rng.gauss(p.skill_mean, p.skill_sd)
    else:
        sign = 1 if rng.random() < p.known_rate else -1
        skill = rng.gauss(sign * p.skill_mean, p.skill_sd)
    entities = tuple(_name(rng) for _ in range(hops))
    answer, distractors = _answers(p.answer_kind, rng)
    top = rng.uniform(*p.distractor_top)
    weights = (top, *(((1 - top) / (len(distractors) - 1),) * (len(distractors) - 1)))
    cues = []
    if rng.random() < p.cue_rate:
        cues.append(rng.choice(TYPE_CUES[best]))
    if rng.random() < p.cue_rate and abs(decomposition) > 0.3:
        cues.append(rng.choice(SPLIT_CUES if decomposition > 0 else WHOLE_CUES))
    show_topic = rng.random() < p.cue_rate
    question = _question(p, rng, topic if show_topic else "", entities, cues)
    return WorldTask(
        id=f"{p.name}-s{seed}-{i:05d}",  # the seed keeps tasks of different seeds apart
        domain=p.name,
        question=question,
        answer=answer,
        distractors=distractors,
        distractor_weights=weights,
        skill=skill,
        affinity=affinity,
        decomposition=decomposition,
        topic=topic,
        role_gain=rng.uniform(*p.role_gain),
        checkable=rng.uniform(*p.checkable),
        hops=hops,
        hop_entities=entities,
        search_rate=rng.uniform(*p.search_rate),
        best_type=best,
    )


def _answers(kind: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    if kind == "integer":
        values = rng.sample(range(1000), 4)
        return str(values[0]), tuple(map(str, values[1:]))
    if kind == "choice":
        letters = rng.sample("ABCD", 4)
        return letters[0], tuple(letters[1:])
    names = []
    while len(names) < 4:
        name = _name(rng)
        if name not in names:
            names.append(name)
    return names[0], tuple(names[1:])


def _question(p: Preset, rng: random.Random, topic: str, entities, cues: list[str]) -> str:
    if p.name == "math":
        subject = rng.choice(TOPICS[topic]["words"]) if topic else rng.choice(("set", "sequence"))
        n = rng.randint(3, 60)
        body = rng.choice(
            (
                f"Consider a {subject} problem with parameter n = {n}. Find the remainder when the "
                "resulting count is divided by 1000.",
                f"Let n = {n}. In a configuration involving a {subject}, determine the number of "
                "valid outcomes, as an integer between 0 and 999.",
                f"For n = {n}, a {subject} is constructed as described. Compute the final value.",
            )
        )
    elif p.name == "search":
        chain = " of ".join(f"the contact of {e}" for e in entities)
        body = rng.choice(
            (
                f"Who is {chain}? Give the full name.",
                f"Identify the person reached by following {chain}. Answer with a name.",
            )
        )
    elif p.name == "multihop":
        a, b = _name(rng), _name(rng)
        body = (
            f"Context: {a} founded the guild of {b}. The guild of {b} was later led by "
            f"the founder's heir. Question: who led the guild of {b} after {a}?"
        )
    else:
        field_ = topic if topic else rng.choice(("physics", "chemistry", "biology"))
        body = (
            f"A graduate-level question in {field_}: which option is consistent with the "
            "observations? (A) first (B) second (C) third (D) fourth"
        )
    prefix = f"[{topic}] " if topic and p.name == "math" and rng.random() < 0.5 else ""
    return " ".join([prefix + body, *cues]).strip()
