"""The sub-agent types: one `AgentType` entry each, with everything about a type that is
data rather than behaviour.

An entry holds the type's name as orchestrations write it, the words every rendering,
prompt and plan shows for it (the world's question cues among them), the debate roles
it takes, the `RunConfig` fields that set how it runs, the calls it makes (what the
predicted cost counts) and how the viewer draws it. Every per-type table in the package
is built from `AGENT_REGISTRY` or looks a type up in it.

What a type does lives with the code that does it, keyed by these names: its executor
in `orchrm.runtime.agents.SUB_AGENTS`, and how the simulated world plays it in
`orchrm.world.model.SUCCESS` and `orchrm.world.model.PRIORS`. Each of those tables calls
`require_every_type` at import, so a type registered here without its behaviour there
stops the import with an error that names it. No other module of the package spells a
type's name: code that needs a type in a fixed place finds it by its entry's attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class CallStep:
    """One kind of LLM call a sub-agent type makes: the `step` its trace records."""

    name: str
    tokens: tuple[float, float]
    """(prompt, completion) tokens of one such call that reads no upstream output: the
    cost model's default, a rounded `fit_cost_model` mean of world logs (math, search and
    multihop)."""
    count: str = ""
    """The `RunConfig` field that sets how many such calls an agent makes; "" for one."""
    per_role: bool = False
    """`count` calls for each debate role."""
    at_once: bool = False
    """The calls run at once: all of them, or with `per_role` one call per role at a
    time (a round), so they wait for one call, or for one call per round."""
    mean_calls: float | None = None
    """For a step that stops early: the mean calls an agent makes (the cost model's
    default, learned from logs by `fit_cost_model`); `count` is then the most."""
    min_calls: float = 0.0
    """For a step that stops early: the fewest calls, unless `count` allows none."""


@dataclass(frozen=True)
class AgentType:
    """One sub-agent type: its name and everything about it that is not behaviour."""

    name: str
    """The class name orchestrations write (`<agent_name>`, `Agent.type`)."""
    descriptions: tuple[str, ...]
    """How a plan describes an agent of the type: an edit gives the agent it adds or
    retypes the first, the world's orchestrators pick one of them."""
    template_descriptions: tuple[str, ...]
    """How a template plan (`orchrm.world.templates`) describes an agent of the type, worded
    for the small budgets real executions run with (three SC tries, a debate of two
    roles, one check); one is drawn per agent."""
    words: str
    """What it does in words, after its class name in the reward model's text."""
    cues: tuple[str, ...]
    """Phrases that hint, in a world task's question (`orchrm.world.tasks`), that the task
    suits the type. Each shares words with `words`: the link from "slips are common" to
    "self-consistency" is knowledge a large reward model brings from pretraining and a
    small one does not, so the world states it in words
    (docs/results.md#what-the-text-allows)."""
    prompt: str
    """What it does, in the orchestrator prompt's list of sub-agents."""
    label: str
    """Its short name on a box of the viewer's graph."""
    colour: str
    """The colour of its boxes in the viewer."""
    steps: tuple[CallStep, ...]
    """The kinds of call it makes, in order."""
    final_step: str
    """The step whose text the agent passes downstream."""
    parameters: tuple[str, ...] = ()
    """The `RunConfig` fields that set how it runs (their defaults are `RunConfig`'s)."""
    min_roles: int = 0
    """Debate roles an agent of the type needs (0: it takes none)."""
    roles: tuple[str, ...] = ()
    """The roles an agent an edit adds gets when the plan has none of two or more to take."""
    searches: bool = False
    """It looks facts up with the run's retriever."""
    checks: bool = False
    """An edit may add it as a final agent that checks the sink's answer."""
    reviews: bool = False
    """An edit may insert it after an inner agent to review that agent's output."""


_ENTRIES = (
    AgentType(
        name="CoTAgent",
        descriptions=(
            "Reason step by step to the answer.",
            "Solve the task with one careful pass.",
        ),
        template_descriptions=(
            "Reason step by step to the answer.",
            "Solve it with one careful pass.",
        ),
        words="step-by-step chain of thought",
        cues=("A direct chain of thought works.", "Reason step by step from the definitions."),
        prompt="one chain-of-thought call.",
        label="CoT",
        colour="#4e79a7",
        steps=(CallStep("answer", (90.0, 480.0)),),
        final_step="answer",
        checks=True,
    ),
    AgentType(
        name="SCAgent",
        descriptions=(
            "Sample several solutions and vote.",
            "Self-consistency over independent tries.",
        ),
        template_descriptions=(
            "Sample several solutions and vote.",
            "Self-consistency over three tries.",
        ),
        words="self-consistency: several tries vote",
        cues=(
            "Slips are common; several tries should vote.",
            "Arithmetic errors are easy; let several tries vote.",
        ),
        prompt="five chain-of-thought samples and a majority vote.",
        label="SC",
        colour="#59a14f",
        steps=(CallStep("answer", (65.0, 470.0), count="sc_samples", at_once=True),),
        final_step="answer",
        parameters=("sc_samples",),
        checks=True,
        reviews=True,
    ),
    AgentType(
        name="DebateAgent",
        descriptions=("Let experts argue, then decide.", "A structured debate between roles."),
        template_descriptions=(
            "Two experts argue, then decide.",
            "A short debate between two roles.",
        ),
        words="debate between experts",
        cues=(
            "Two approaches seem plausible; experts should debate them.",
            "Experts would debate the method.",
        ),
        prompt="debaters in the roles you list argue over several rounds, then a final decision.",
        label="Debate",
        colour="#e15759",
        steps=(
            CallStep("debate", (600.0, 276.0), count="debate_rounds", per_role=True, at_once=True),
            CallStep("decide", (700.0, 178.0)),
        ),
        final_step="decide",
        parameters=("debate_rounds",),
        min_roles=2,
        roles=("Solver", "Critic"),
        checks=True,
        reviews=True,
    ),
    AgentType(
        name="ReflexionAgent",
        descriptions=("Answer, critique, refine.", "Iterate until a critic accepts."),
        template_descriptions=(
            "Answer, critique, refine.",
            "Check the answer and fix it if wrong.",
        ),
        words="reflexion: critique and refine",
        cues=(
            "A first attempt misses cases; critique and refine it.",
            "Check every case: critique the draft and refine it.",
        ),
        prompt="answer, critique, refine, until the critic accepts.",
        label="Reflexion",
        colour="#f28e2b",
        steps=(
            CallStep("answer", (65.0, 484.0)),
            CallStep(
                "critic", (550.0, 132.0), count="reflexion_rounds", mean_calls=1.25, min_calls=1.0
            ),
            CallStep("refine", (560.0, 440.0), count="reflexion_rounds", mean_calls=0.25),
        ),
        final_step="refine",
        parameters=("reflexion_rounds",),
        checks=True,
        reviews=True,
    ),
    AgentType(
        name="WebSearchAgent",
        descriptions=("Search the corpus, then summarize.", "Look up the needed facts."),
        template_descriptions=(
            "Look the fact up in the corpus.",
            "Search, then answer from the passages.",
        ),
        words="web search",
        cues=("Look it up with a web search.", "The facts are documented online; search the web."),
        prompt="searches a corpus over several turns, then summarizes.",
        label="WebSearch",
        colour="#76b7b2",
        steps=(
            CallStep(
                "search", (107.0, 27.0), count="search_iterations", mean_calls=2.2, min_calls=1.0
            ),
            CallStep("summary", (105.0, 212.0)),
        ),
        final_step="summary",
        parameters=("search_iterations", "search_k"),
        searches=True,
    ),
)

AGENT_REGISTRY: dict[str, AgentType] = {t.name: t for t in _ENTRIES}
"""Every sub-agent type by name, in the order prompts, tables and the viewer list them
(the types MAS-Orchestra defines, docs/formats.md#sub-agent-types)."""

AGENT_TYPES: tuple[str, ...] = tuple(AGENT_REGISTRY)
"""The registered type names, in registry order."""

RECONCILER = "CoTAgent"
"""The type of the agent an edit adds to settle two answers into one."""


def require_every_type(table: Iterable[str], where: str) -> None:
    """Raise `RuntimeError` unless the keys of `table` are exactly the registered type
    names. Behaviour kept outside the registry calls it on its table at import, so a type
    registered without its behaviour, or behaviour for a type not registered, names
    itself (`where` says which table) before anything runs."""
    keys = set(table)
    missing = [t for t in AGENT_TYPES if t not in keys]
    unknown = sorted(keys.difference(AGENT_TYPES))
    if missing or unknown:
        problems = [f"no entry for {t}" for t in missing] + [
            f"{t} is not registered" for t in unknown
        ]
        raise RuntimeError(
            f"{where} does not cover the sub-agent types of "
            f"orchrm/orchestration/agent_types.py: {'; '.join(problems)}"
        )
