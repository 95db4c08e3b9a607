"""Template orchestrators: plan writers for the generated tasks
(`orchrm.tasks.benchmarks.generated`), for models too small to write a usable plan.

A template orchestrator draws a plan structure (`STRUCTURES`: one CoT, SC, Debate,
Reflexion or WebSearch agent; CoT then a Reflexion check; setup then solve; two solvers
reconciled; SC then a CoT check; a search then a CoT answer) and its wording, and
writes it as harmony XML with a thinking channel, which `orchrm.parse.parse_harmony`
reads like any orchestrator's text. The base one draws every structure alike; the
specialized one is told the task's kind and prefers the structures `PREFERRED` names for
it. Like the world's orchestrators
(`orchrm.world.orchestrators`), each reports the log-probability of what it wrote: the
log-probability of its draws plus `TOKEN_LOGPROB` a written token.

The structures find the types they wire by what the registry's entries say the types do
(`ONE_CALL_TYPE`, `VOTE_TYPE`, ...), and describe each agent with its entry's
`template_descriptions`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from orchrm.orchestration import (
    AGENT_REGISTRY,
    Agent,
    DoM,
    Edge,
    Orchestration,
    approx_token_count,
    to_harmony,
)
from orchrm.tasks.benchmarks.generated import GeneratedTask
from orchrm.world.orchestrators import (
    CRITIC_TYPE,
    DEBATE_TYPE,
    ONE_CALL_TYPE,
    SEARCH_TYPE,
    TOKEN_LOGPROB,
    Choices,
    first_type,
)

ROLES = (("Solver", "Checker"), ("Proposer", "Skeptic"), ("Mathematician", "Reviewer"))
"""The debate roles a one-agent debate plan draws from."""
VOTE_TYPE = first_type(
    lambda k: len(k.steps) == 1 and bool(k.steps[0].count) and k.steps[0].at_once,
    "makes several tries of one call at once",
)
"""A type that makes several tries of one call at once and votes (self-consistency);
the structures find their other types as the world's orchestrators do."""
DESCRIPTIONS = {name: kind.template_descriptions for name, kind in AGENT_REGISTRY.items()}
"""Each sub-agent type's template descriptions (its registry entry's), worded for the
small budgets real executions run with; the world's orchestrators describe theirs with
`orchrm.world.orchestrators.DESCRIPTIONS`."""
CHECK_INPUTS = ("Check ${Solve} and give the final answer.", "Verify ${Solve}; fix it if wrong.")
FOUND_INPUTS = (
    "Using ${Find}, give the final answer.",
    "Read ${Find} and answer the task from it.",
)
SETUP_INPUTS = (
    "List the numbers in the task and the operation it asks for.",
    "Restate the task as one calculation.",
)

Template = Callable[[Choices], tuple[list[Agent], list[Edge]]]
"""Draws -> (agents, edges) of one plan structure."""


def _one(kind: str) -> Template:
    def build(d: Choices) -> tuple[list[Agent], list[Edge]]:
        roles = d.pick(ROLES) if AGENT_REGISTRY[kind].min_roles else None
        agent_id = d.pick(("Solver", "Main", "Answer"))
        return [Agent(agent_id, kind, d.pick(DESCRIPTIONS[kind]), "", roles)], []

    return build


def _cot_reflexion(d: Choices) -> tuple[list[Agent], list[Edge]]:
    solve = Agent("Solve", ONE_CALL_TYPE, d.pick(DESCRIPTIONS[ONE_CALL_TYPE]))
    check = Agent("Check", CRITIC_TYPE, d.pick(DESCRIPTIONS[CRITIC_TYPE]), d.pick(CHECK_INPUTS))
    return [solve, check], [Edge("Solve", "Check")]


def _setup_solve(d: Choices) -> tuple[list[Agent], list[Edge]]:
    setup = Agent("Setup", ONE_CALL_TYPE, "Set the task up.", d.pick(SETUP_INPUTS))
    solve = Agent(
        "Solve",
        ONE_CALL_TYPE,
        d.pick(DESCRIPTIONS[ONE_CALL_TYPE]),
        "Using ${Setup}, solve the task.",
    )
    return [setup, solve], [Edge("Setup", "Solve")]


def _fan_in(d: Choices) -> tuple[list[Agent], list[Edge]]:
    a = Agent("Path_A", ONE_CALL_TYPE, d.pick(DESCRIPTIONS[ONE_CALL_TYPE]))
    b = Agent("Path_B", VOTE_TYPE, d.pick(DESCRIPTIONS[VOTE_TYPE]))
    settle = Agent(
        "Reconcile",
        ONE_CALL_TYPE,
        "Compare both answers and settle.",
        "Compare ${Path_A} with ${Path_B} and give the final answer.",
    )
    return [a, b, settle], [Edge("Path_A", "Reconcile"), Edge("Path_B", "Reconcile")]


def _search_cot(d: Choices) -> tuple[list[Agent], list[Edge]]:
    find = Agent("Find", SEARCH_TYPE, d.pick(DESCRIPTIONS[SEARCH_TYPE]))
    answer = Agent("Answer", ONE_CALL_TYPE, "Answer from what was found.", d.pick(FOUND_INPUTS))
    return [find, answer], [Edge("Find", "Answer")]


def _sc_check(d: Choices) -> tuple[list[Agent], list[Edge]]:
    solve = Agent("Solve", VOTE_TYPE, d.pick(DESCRIPTIONS[VOTE_TYPE]))
    check = Agent("Check", ONE_CALL_TYPE, "Check the voted answer.", d.pick(CHECK_INPUTS))
    return [solve, check], [Edge("Solve", "Check")]


STRUCTURES: dict[str, Template] = {
    "cot": _one(ONE_CALL_TYPE),
    "sc": _one(VOTE_TYPE),
    "debate": _one(DEBATE_TYPE),
    "reflexion": _one(CRITIC_TYPE),
    "cot_reflexion": _cot_reflexion,
    "setup_solve": _setup_solve,
    "fan_in": _fan_in,
    "sc_check": _sc_check,
    "search": _one(SEARCH_TYPE),
    "search_cot": _search_cot,
}
"""Plan structure -> its template (agents and edges, wording drawn)."""
SINGLE = {
    ONE_CALL_TYPE: "cot",
    VOTE_TYPE: "sc",
    DEBATE_TYPE: "debate",
    CRITIC_TYPE: "reflexion",
    SEARCH_TYPE: "search",
}
"""The one-agent structure of each sub-agent type the structures wire."""

THINKING = {
    "cot": "One careful chain of thought is enough for this.",
    "sc": "Small slips are likely here; three independent tries that vote catch them.",
    "debate": "Two views that argue should expose a wrong step.",
    "reflexion": "Answer first, then let a critic check it and refine.",
    "cot_reflexion": "Solve it, then have a critic check the result and fix it if wrong.",
    "setup_solve": "Set the calculation up first, then solve it.",
    "fan_in": "Two independent solvers, then reconcile their answers.",
    "sc_check": "Vote over several tries, then check the voted answer.",
    "search": "Only a document can say this; search the corpus and answer from it.",
    "search_cot": "Search the corpus first, then answer from the passages found.",
}
"""Each structure's thinking channel."""
WHY = {
    "add": "It is an addition of {size} numbers.",
    "sub": "It is a subtraction of {size} numbers.",
    "mul": "It is a multiplication of {size} numbers.",
    "word": "It is a short word problem.",
    "two_step": "It takes more than one operation.",
    "compare": "It asks which number is larger or smaller.",
    "count": "It asks to count letters.",
    "capital": "It asks for a city of a republic that only a document can name.",
    "founded": "It asks for a year in a town's history that only a document states.",
}
"""What the specialized orchestrator's thinking says of each task kind."""
SIZES = {1: "small", 2: "two-digit", 3: "three-digit"}

PREFERRED: dict[str, tuple[str, ...]] = {
    "add": ("cot", "cot_reflexion", "sc"),
    "sub": ("cot", "sc", "sc_check"),
    "mul": ("cot", "debate", "sc"),
    "word": ("sc", "debate", "sc_check"),
    "two_step": ("sc", "sc_check", "fan_in"),
    "compare": ("sc", "sc_check", "cot"),
    "count": ("sc", "debate", "cot"),
    "capital": ("search", "search_cot"),
    "founded": ("search", "search_cot"),
}
"""The structures the specialized orchestrator prefers for each kind of task, first the
one-agent types that SmolLM2-135M-Instruct's calibration measured best on that kind
(seed 0: CoT on additions and products, SC on comparisons; `orchrm.experiments.real_exec.run`),
then structures built on them."""


def single_plan(structure: str) -> Orchestration:
    """The plan of `structure` with the wording of a fixed draw (seed 0) and its
    thinking: what the calibration runs for each sub-agent type."""
    agents, edges = STRUCTURES[structure](Choices(random.Random(0)))
    return Orchestration(tuple(agents), tuple(edges), DoM.HIGH, THINKING[structure])


@dataclass(frozen=True)
class TemplateOrchestrator:
    """Writes a plan from `STRUCTURES` as harmony XML. `specialized`: with probability
    `follow`, one of `PREFERRED[kind]` (the first of n with weight n, the next n - 1, ...,
    the last 1), else any structure alike; otherwise every structure alike."""

    name: str
    specialized: bool
    seed: int = 0
    follow: float = 0.7

    def write(self, task: GeneratedTask, sample: int) -> tuple[str, float]:
        """(harmony text, its log-probability) of one plan for `task`."""
        d = Choices(random.Random(f"{self.name}|{self.seed}|{task.task.id}|{sample}"))
        names = list(STRUCTURES)
        if self.specialized:
            preferred = PREFERRED[task.kind]
            ranks = {s: len(preferred) - i for i, s in enumerate(preferred)}
            total = sum(ranks.values())
            weights = [self.follow * ranks.get(s, 0) / total for s in names]
            weights = [w + (1 - self.follow) / len(names) for w in weights]
        else:
            weights = [1.0] * len(names)
        structure = d.pick(names, weights)
        agents, edges = STRUCTURES[structure](d)
        why = WHY[task.kind].format(size=SIZES[task.level]) if self.specialized else ""
        thinking = " ".join(x for x in (why, THINKING[structure]) if x)
        text = to_harmony(Orchestration(tuple(agents), tuple(edges), DoM.HIGH, thinking))
        return text, d.logprob + TOKEN_LOGPROB * approx_token_count(text)


def structure_of(record: dict) -> str:
    """The template structure a log record's plan was drawn from (by its agents and
    inputs); `?` for a plan no template writes."""
    o = record.get("orchestration") or {}
    types = tuple(a["type"] for a in o.get("agents", []))
    ids = tuple(a["id"] for a in o.get("agents", []))
    if len(types) == 1:
        return SINGLE.get(types[0], "?")
    known = {
        (ONE_CALL_TYPE, CRITIC_TYPE): "cot_reflexion",
        (VOTE_TYPE, ONE_CALL_TYPE): "sc_check",
        (ONE_CALL_TYPE, VOTE_TYPE, ONE_CALL_TYPE): "fan_in",
        (SEARCH_TYPE, ONE_CALL_TYPE): "search_cot",
    }
    if ids and ids[0] == "Setup":
        return "setup_solve"
    return known.get(types, "?")
