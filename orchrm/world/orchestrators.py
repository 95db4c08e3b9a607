"""The world's orchestrators: a base one and a specialized one, writing harmony XML.

Both draw a plan shape (one agent, a chain, a fan-in, one search per fact), sub-agent
types, debate roles, ids and wording, and write it as harmony text with a thinking
channel. The base orchestrator follows a fixed prior; the specialized one reads the cue
phrases in the question (which sub-agent type suits it, whether to split it, the topic,
the entities to search) and acts on them most of the time, so it is better on average,
not always. Each reports the log-probability of what it wrote: the sum of the log
probabilities of its choices plus a per-token charge, as a language model's would.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from orchrm.orchestration import (
    AGENT_REGISTRY,
    AGENT_TYPES,
    Agent,
    AgentType,
    DoM,
    Edge,
    Orchestration,
    approx_token_count,
    neighbours,
    to_harmony,
)
from orchrm.world.model import NO_FACTS_PRIOR, PRIORS
from orchrm.world.tasks import SPLIT_CUES, TOPICS, WHOLE_CUES, WorldTask, hinted_type


def first_type(does: Callable[[AgentType], bool], what: str) -> str:
    """The first registered type whose entry `does` what a plan needs of it (`what`, in
    words, for the error when no type does)."""
    found = next((name for name, kind in AGENT_REGISTRY.items() if does(kind)), None)
    if found is None:
        raise RuntimeError(f"no registered sub-agent type {what}")
    return found


# The types the plan shapes put in fixed places, found by what their entries say they
# do (`orchrm.orchestration.agent_types`), so that only the registry spells a name.
ONE_CALL_TYPE = first_type(
    lambda k: len(k.steps) == 1 and not k.steps[0].count, "answers in one call"
)
"""A type that answers in one call (a chain of thought): setups, checks, reconcilers."""
CRITIC_TYPE = first_type(
    lambda k: {"critic", "refine"} <= {s.name for s in k.steps}, "critiques and refines"
)
"""A type that critiques its answer and refines it (reflexion)."""
DEBATE_TYPE = first_type(lambda k: k.min_roles > 0, "takes debate roles")
"""A type whose agents argue in roles, then decide (a debate)."""
SEARCH_TYPE = first_type(lambda k: k.searches, "searches")
"""A type that looks facts up with the run's retriever."""

SOLVERS = AGENT_TYPES
"""The types a plan's main solver is drawn from, with each type's weights in `PRIORS`."""
GENERIC_ROLES = (
    ("Solver", "Critic"),
    ("Optimist", "Skeptic"),
    ("Proposer", "Reviewer", "Judge"),
    ("First Analyst", "Second Analyst"),
)
DESCRIPTIONS = {name: kind.descriptions for name, kind in AGENT_REGISTRY.items()}
"""Each sub-agent type's descriptions (its registry entry's), one drawn per agent."""
THINKING = {
    "single": ("One {t} is enough here: {why}", "A single {t} keeps it simple; {why}"),
    "chain": (
        "Split the work: set up first, then solve with {t}; {why}",
        "Two stages, setup then a {t}; {why}",
    ),
    "verify": (
        "Set up, solve with {t}, then check the result; {why}",
        "Three stages with a final check; {why}",
    ),
    "fan_in": (
        "Two independent solvers ({t} and another), then compare; {why}",
        "Run two approaches in parallel and reconcile them; {why}",
    ),
    "per_fact": (
        "One search per fact, then combine; {why}",
        "Each entity gets its own search; {why}",
    ),
}
TOKEN_LOGPROB = -0.02
"""Log-probability charged per written token, on top of the plan's choices."""
WHY = ("the question suggests it.", "this fits the task.", "it balances cost and accuracy.")


@dataclass
class Choices:
    """Draws choices and adds up their log-probability."""

    rng: random.Random
    logprob: float = 0.0
    trail: list[str] = field(default_factory=list)

    def pick(self, options, weights=None):
        weights = list(weights) if weights is not None else [1.0] * len(options)
        total = sum(weights)
        index = self.rng.choices(range(len(options)), weights)[0]
        self.logprob += math.log(weights[index] / total)
        return options[index]

    def chance(self, p: float) -> bool:
        return self.pick((True, False), (p, 1 - p))


@dataclass(frozen=True)
class WorldOrchestrator:
    """A plan writer. `specialized` ones act on the cues in the question with
    probability `follow`; `invalid_rate` of plans break a graph rule (as LLMs do)."""

    name: str
    specialized: bool
    seed: int = 0
    follow: float = 0.75
    invalid_rate: float = 0.05

    def write(self, task: WorldTask, sample: int, dom: str = "high") -> tuple[str, float]:
        """(harmony text, its log-probability) for one sample of a plan for `task`."""
        c = self._choices(task, sample)
        o = self._plan(task, c, dom)
        text = to_harmony(o)
        if c.chance(self.invalid_rate):
            text = _break(text, c)
        if c.chance(0.3):
            text = c.pick(("Here is the plan.\n", "```xml\n", "Plan:\n")) + text
        # Besides its choices, a language model pays for every token it writes.
        return text, c.logprob + TOKEN_LOGPROB * approx_token_count(text)

    def plan(self, task: WorldTask, sample: int, dom: str = "high") -> Orchestration:
        """The plan `write` renders for this sample, before any slip breaks its text."""
        return self._plan(task, self._choices(task, sample), dom)

    def _choices(self, task: WorldTask, sample: int) -> Choices:
        return Choices(random.Random(f"{self.name}|{self.seed}|{task.id}|{sample}"))

    def _plan(self, task: WorldTask, c: Choices, dom: str) -> Orchestration:
        q = task.question
        cued_type = hinted_type(q)
        split = any(x in q for x in SPLIT_CUES)
        whole = any(x in q for x in WHOLE_CUES)
        entities = [e for e in task.hop_entities if e in q]
        topic = next(
            (t for t in TOPICS if f"[{t}]" in q or any(w in q for w in TOPICS[t]["words"])), ""
        )
        if self.specialized and cued_type and c.chance(self.follow):
            main = cued_type
        elif self.specialized:
            main = c.pick(SOLVERS, [_specialized_prior(t, task) for t in SOLVERS])
        else:
            main = c.pick(SOLVERS, [PRIORS[t].base for t in SOLVERS])
        shapes = ["single", "chain", "verify", "fan_in"] + (["per_fact"] if entities else [])
        if dom == "low":
            shape = "single"
        elif self.specialized and split and c.chance(self.follow):
            shape = c.pick(("chain", "verify", "per_fact") if entities else ("chain", "verify"))
        elif self.specialized and whole and c.chance(self.follow):
            shape = "single"
        elif self.specialized:
            shape = c.pick(shapes, (4, 2, 1, 2, 3)[: len(shapes)])
        else:
            shape = c.pick(shapes, (6, 2, 1, 2, 0.5)[: len(shapes)])
        roles = self._roles(topic, c)
        agents, edges = _SHAPES[shape](main, roles, entities, c)
        thinking = c.pick(THINKING[shape]).format(t=main, why=c.pick(WHY))
        if dom == "low":
            a = agents[0]
            agent = Agent(
                "answer_out", a.type, a.description, a.input, a.debate_roles, "answer_out"
            )
            return Orchestration((agent,), (), DoM.LOW, thinking, "answer_out")
        return Orchestration(tuple(agents), tuple(edges), DoM.HIGH, thinking)

    def _roles(self, topic: str, c: Choices) -> tuple[str, ...]:
        match = topic and (c.chance(0.85) if self.specialized else c.chance(0.25))
        if match:
            expert = TOPICS[topic]["experts"][0].title()
            return (expert, c.pick(("Skeptic", "Generalist", "Checker")))
        if not topic and c.chance(0.2):  # a guess at the expertise
            guess = c.pick(sorted(TOPICS))
            return (TOPICS[guess]["experts"][0].title(), "Skeptic")
        return c.pick(GENERIC_ROLES)


def _specialized_prior(agent_type: str, task: WorldTask) -> float:
    """The specialized orchestrator's weight on `agent_type` when no cue decides."""
    if AGENT_REGISTRY[agent_type].searches and not task.hops:
        return NO_FACTS_PRIOR
    return PRIORS[agent_type].specialized


def _agent(agent_id: str, kind: str, roles, text: str, c: Choices) -> Agent:
    takes_roles = AGENT_REGISTRY[kind].min_roles > 0
    return Agent(agent_id, kind, c.pick(DESCRIPTIONS[kind]), text, roles if takes_roles else None)


def _single(main, roles, entities, c):
    return [_agent(c.pick(("Solver", "Main", "Final_Answer")), main, roles, "", c)], []


def _chain(main, roles, entities, c):
    setup = _agent(
        "Setup",
        ONE_CALL_TYPE,
        None,
        c.pick(
            (
                "Identify the given quantities and what is asked.",
                "Restate the task as precise sub-goals.",
            )
        ),
        c,
    )
    solve = _agent("Solve", main, roles, "Using ${Setup}, solve the original task.", c)
    return [setup, solve], [Edge("Setup", "Solve")]


def _verify(main, roles, entities, c):
    agents, edges = _chain(main, roles, entities, c)
    check = _agent(
        "Check",
        c.pick((CRITIC_TYPE, ONE_CALL_TYPE)),
        None,
        "Check ${Solve} and give the final answer.",
        c,
    )
    return [*agents, check], [*edges, Edge("Solve", "Check")]


def _fan_in(main, roles, entities, c):
    other = c.pick([t for t in SOLVERS if t != main])
    a = _agent("Path_A", main, roles, "", c)
    b = _agent("Path_B", other, roles, "", c)
    judge_type = c.pick((ONE_CALL_TYPE, DEBATE_TYPE))
    judge = _agent(
        "Reconcile", judge_type, roles, "Compare ${Path_A} with ${Path_B} and settle the answer.", c
    )
    return [a, b, judge], [Edge("Path_A", "Reconcile"), Edge("Path_B", "Reconcile")]


def _per_fact(main, roles, entities, c):
    finds = [
        _agent(f"Find_{n + 1}", SEARCH_TYPE, None, f"Find the contact of {e}.", c)
        for n, e in enumerate(entities)
    ]
    refs = " and ".join("${" + a.id + "}" for a in finds)
    combine = _agent(
        "Combine",
        c.pick((ONE_CALL_TYPE, CRITIC_TYPE)),
        None,
        f"Combine {refs} into the final name.",
        c,
    )
    return [*finds, combine], [Edge(a.id, "Combine") for a in finds]


_SHAPES = {
    "single": _single,
    "chain": _chain,
    "verify": _verify,
    "fan_in": _fan_in,
    "per_fact": _per_fact,
}


def _break(text: str, c: Choices) -> str:
    """A realistic slip: a dropped reference, a dangling edge, or a cut-off output."""
    how = c.pick(("reference", "edge", "truncate"))
    if how == "reference" and "${" in text:
        return re.sub(r"\$\{(\w+)\}", r"the \1 result", text, count=1)
    if how == "edge" and "<edge>" in text:
        return text.replace("<edge>", "<edge>\n  <from>Ghost</from><to>Solver</to>", 1)
    return text[: len(text) // 2]


@dataclass(frozen=True)
class EditingOrchestrator:
    """Writes edits of what `writers` logged: sample `i` takes one of the `logged` plans
    each writer wrote for the task (chosen by a seeded draw) and applies 1 to `max_edits`
    edits drawn from its neighbours (`orchrm.orchestration.edits`), the moves plan
    search makes. Executed on the world, these records show a reward model what the
    search's edits do to a plan's success; a plan with no neighbour (a direct answer) is
    written as it was. Its log-probability is the draw's: uniform over the choices."""

    writers: tuple[WorldOrchestrator, ...]
    logged: int
    max_edits: int = 2
    name: str = "edited"
    seed: int = 0

    def write(self, task: WorldTask, sample: int, dom: str = "high") -> tuple[str, float]:
        """(harmony text, its log-probability) of one edited plan for `task`."""
        rng = random.Random(f"{self.name}|{self.seed}|{task.id}|{sample}")
        writer = rng.choice(self.writers)
        plan = writer.plan(task, rng.randrange(self.logged), dom)
        logprob = -math.log(len(self.writers) * self.logged)
        for _ in range(rng.randint(1, self.max_edits)):
            options = neighbours(plan)
            if not options:
                break
            plan = rng.choice(options).plan
            logprob -= math.log(len(options))
        text = to_harmony(plan)
        return text, logprob + TOKEN_LOGPROB * approx_token_count(text)


def orchestrators(seed: int = 0) -> dict[str, WorldOrchestrator]:
    """The world's two orchestrators, by name."""
    return {
        "base": WorldOrchestrator("base", specialized=False, seed=seed, invalid_rate=0.06),
        "specialized": WorldOrchestrator(
            "specialized", specialized=True, seed=seed, invalid_rate=0.02
        ),
    }
