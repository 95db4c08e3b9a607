"""Every prompt orchrm sends to an LLM, in one place, written for orchrm.

Sub-agents end their replies with a line `Answer: <final answer>`, which
`extract_answer` reads back; the orchestrator prompts state the harmony format and the
graph rules of docs/formats.md#graph-rules. Changing a prompt changes what every backend sees,
the simulated world included, so prompts are data: plain strings and small builders.
"""

from __future__ import annotations

from orchrm.errors import ConfigError
from orchrm.orchestration import AGENT_REGISTRY, AGENT_TYPES

ANSWER_LINE = "Answer:"

SOLVER_SYSTEM = (
    "You are a careful problem solver. Reason step by step, then finish with one line "
    f"of the form '{ANSWER_LINE} <final answer>' and nothing after it."
)


def compose_task(question: str, sub_task: str) -> str:
    """The text a sub-agent works on: the question alone when its input is empty,
    otherwise the original task plus the current sub-task (docs/formats.md#sub-agent-input)."""
    if not sub_task.strip():
        return question
    return (
        f"Original task: {question}\n\nCurrent sub-task: {sub_task}\n\n"
        "Solve the current sub-task first. If its result answers the original task, give "
        "that as the final answer; otherwise use it to answer the original task."
    )


def cot(task: str) -> list[dict]:
    """One chain-of-thought call (a chain of thought's, and each self-consistency sample)."""
    return [
        {"role": "system", "content": SOLVER_SYSTEM},
        {"role": "user", "content": task},
    ]


def debate_open(task: str, role: str) -> list[dict]:
    """A debater's first answer, in character."""
    return [
        {"role": "system", "content": f"You are a {role} in a debate. {SOLVER_SYSTEM}"},
        {"role": "user", "content": task},
    ]


def debate_round(task: str, role: str, own: str, others: list[tuple[str, str]]) -> list[dict]:
    """A debater sees the other debaters' latest answers and updates its own."""
    views = "\n\n".join(f"[{name}]\n{text}" for name, text in others)
    return [
        {"role": "system", "content": f"You are a {role} in a debate. {SOLVER_SYSTEM}"},
        {"role": "user", "content": task},
        {"role": "assistant", "content": own},
        {
            "role": "user",
            "content": "The other debaters answered:\n\n"
            f"{views}\n\nWeigh their arguments against yours and give your updated answer.",
        },
    ]


def debate_decide(task: str, finals: list[tuple[str, str]]) -> list[dict]:
    """The final decision after the last round of a debate."""
    views = "\n\n".join(f"[{name}]\n{text}" for name, text in finals)
    return [
        {"role": "system", "content": f"You judge a debate. {SOLVER_SYSTEM}"},
        {
            "role": "user",
            "content": f"Task:\n{task}\n\nFinal positions:\n\n{views}\n\n"
            "Decide the correct final answer.",
        },
    ]


CRITIC_ACCEPT = "VERDICT: CORRECT"


def critic(task: str, attempt: str) -> list[dict]:
    """Reflexion's critic: accept the attempt, or say what is wrong."""
    return [
        {
            "role": "system",
            "content": "You review solutions. If the solution is correct and complete, reply "
            f"with '{CRITIC_ACCEPT}' alone. Otherwise explain the errors precisely.",
        },
        {"role": "user", "content": f"Task:\n{task}\n\nProposed solution:\n{attempt}"},
    ]


def refine(task: str, attempt: str, feedback: str) -> list[dict]:
    """Reflexion's refinement of an attempt after the critic's feedback."""
    return [
        {"role": "system", "content": SOLVER_SYSTEM},
        {"role": "user", "content": task},
        {"role": "assistant", "content": attempt},
        {"role": "user", "content": f"A reviewer found problems:\n{feedback}\n\nFix them."},
    ]


SEARCH_PREFIX = "SEARCH:"
SEARCH_DONE = "DONE"


def search_step(task: str, notes: list[str]) -> list[dict]:
    """WebSearch: decide the next query, or stop when the notes suffice."""
    found = "\n\n".join(notes) if notes else "(nothing yet)"
    return [
        {
            "role": "system",
            "content": "You research a task with a search engine. Reply with one line "
            f"'{SEARCH_PREFIX} <query>' to search, or '{SEARCH_DONE}' when the notes "
            "contain what the task needs.",
        },
        {"role": "user", "content": f"Task:\n{task}\n\nNotes so far:\n{found}"},
    ]


def search_summary(task: str, notes: list[str]) -> list[dict]:
    """WebSearch: answer from the gathered notes."""
    found = "\n\n".join(notes) if notes else "(no results)"
    return [
        {"role": "system", "content": SOLVER_SYSTEM},
        {"role": "user", "content": f"Task:\n{task}\n\nSearch results:\n{found}"},
    ]


_SUB_AGENTS = "Sub-agents you can use:\n" + "\n".join(
    f"- {name}: {kind.prompt}" for name, kind in AGENT_REGISTRY.items()
)
_NAMES = "|".join(AGENT_TYPES)
_ROLES = " or ".join(name for name, kind in AGENT_REGISTRY.items() if kind.min_roles)

_LOW_DOM = f"""You design how a task is solved. Use at most ONE sub-agent, or answer directly.

{_SUB_AGENTS}

Write exactly:
<thinking>why this choice</thinking>
then either a direct answer:
<answer>the final answer</answer>
or one agent and the id of its output:
<agent>
  <agent_name>{_NAMES}</agent_name>
  <agent_description>what it does</agent_description>
  <required_arguments>
    <agent_input></agent_input>
    <debate_roles>["Role A", "Role B"]</debate_roles>   ({_ROLES} only, two or more)
  </required_arguments>
  <agent_output_id>out</agent_output_id>
</agent>
<answer>out</answer>
An empty <agent_input> means the agent works on the original task."""

_HIGH_DOM = f"""You design a multi-agent system that solves a task: a graph of sub-agents.

{_SUB_AGENTS}

Write <thinking>why this design</thinking>, then one <agent> block per agent:
<agent>
  <agent_id>letters_digits_underscores</agent_id>
  <agent_name>{_NAMES}</agent_name>
  <agent_description>what it does</agent_description>
  <required_arguments>
    <agent_input>its sub-task; ${{other_id}} inserts that agent's output</agent_input>
    <debate_roles>["Role A", "Role B"]</debate_roles>   ({_ROLES} only, two or more)
  </required_arguments>
</agent>
then exactly one edge block:
<edge>
  <from>id1</from><to>id2</to>
</edge>
Rules: every <from>/<to> names a declared agent; no self-loops and no cycles; at least one
agent has no incoming edge; exactly one agent has no outgoing edge and its output is the
final answer; every agent is connected to the flow; ${{X}} in an agent's input requires an
edge X -> that agent, and every edge X -> Y requires ${{X}} in Y's input; an empty
<agent_input> means the original task. A single agent with an empty <edge></edge> is fine."""


EXAMPLE_TASK = "A shop sells pens at 3 dollars each. How much do 14 pens cost?"
"""The task of the worked example `orchestrator(..., example=True)` shows."""

_EXAMPLE_PLANS = {
    "low": """<thinking>One calculation suffices; several tries voting catch a slip.</thinking>
<agent>
  <agent_name>SCAgent</agent_name>
  <agent_description>Multiply the price by the number of pens.</agent_description>
  <required_arguments>
    <agent_input></agent_input>
  </required_arguments>
  <agent_output_id>total</agent_output_id>
</agent>
<answer>total</answer>""",
    "high": """<thinking>Compute the cost, then have a critic check the multiplication.</thinking>
<agent>
  <agent_id>compute</agent_id>
  <agent_name>CoTAgent</agent_name>
  <agent_description>Multiply the price by the number of pens.</agent_description>
  <required_arguments>
    <agent_input>Compute 14 times 3 dollars.</agent_input>
  </required_arguments>
</agent>
<agent>
  <agent_id>check</agent_id>
  <agent_name>ReflexionAgent</agent_name>
  <agent_description>Check the product and give the final cost.</agent_description>
  <required_arguments>
    <agent_input>Check this result and give the final cost: ${compute}</agent_input>
  </required_arguments>
</agent>
<edge>
  <from>compute</from><to>check</to>
</edge>""",
}


def orchestrator(question: str, dom: str, example: bool = False) -> list[dict]:
    """The orchestrator prompt for a low- or high-DoM plan of `question`. With `example`,
    one worked exchange (`EXAMPLE_TASK` and a plan for it) comes before the task: small
    models follow the format from an example far more often than from its description."""
    if dom not in ("low", "high"):
        raise ConfigError(f"dom must be 'low' or 'high', got {dom!r}")
    shown = [
        {"role": "user", "content": f"Task:\n{EXAMPLE_TASK}"},
        {"role": "assistant", "content": _EXAMPLE_PLANS[dom]},
    ]
    return [
        {"role": "system", "content": _LOW_DOM if dom == "low" else _HIGH_DOM},
        *(shown if example else []),
        {"role": "user", "content": f"Task:\n{question}"},
    ]


def extract_answer(text: str) -> str:
    """The final answer in a sub-agent reply: the last `Answer:` line, else the last
    `\\boxed{...}`, else the last non-empty line. Linear in the reply's length.

    An `Answer:` line may be bold (`**Answer:** 25`) and in any case; when nothing
    follows its colon, the answer is the next non-blank line.
    """
    found = _last_answer_line(text)
    if found is not None:
        return found.rstrip(".").strip("*").strip()
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _last_answer_line(text: str) -> str | None:
    """What the last `Answer:` line of `text` gives, stripped; None when there is none.

    One pass over the lines: a label line with nothing after its colon takes the next
    non-blank line, and the scan goes on after that line.
    """
    lines = text.split("\n")
    found = None
    i = 0
    while i < len(lines):
        rest = _after_answer_label(lines[i])
        i += 1
        if rest is None:
            continue
        if rest.strip():
            found = rest.strip()
            continue
        blank = bool(rest)  # whitespace after the colon reads as an empty answer
        while i < len(lines) and not lines[i].strip():
            blank = blank or bool(lines[i])
            i += 1
        if i < len(lines):
            found = lines[i].strip()
            i += 1
        elif blank:
            found = ""
    return found


def _after_answer_label(line: str) -> str | None:
    """The text after `Answer:` (`**Answer:**`, any case) when `line` opens with it."""
    head = line.lstrip().lstrip("*").lstrip()
    if head[:6].lower() != "answer":
        return None
    head = head[6:].lstrip().lstrip("*").lstrip()
    return head[1:] if head.startswith(":") else None


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None
