"""The executors of the sub-agent types (docs/formats.md#sub-agent-types) over the backend
interface: `SUB_AGENTS` holds one for each type of `orchrm.orchestration.AGENT_REGISTRY`,
which says everything else about a type.

Each sub-agent is an async function `(ctx, task) -> AgentOutput`; every LLM call goes
through `ctx.call`, which applies the run's timeout and retry policy and records the
call in the trace. Call patterns (what the world's token accounting mirrors, and each
type's registry `steps` describe for the predicted cost): CoT 1 call; SC `sc_samples`
calls; Debate roles x rounds + 1; Reflexion 2 to 1 + 2 x rounds; WebSearch up to
`search_iterations` + 1.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orchrm.orchestration import Agent, require_every_type
from orchrm.runtime import prompts
from orchrm.runtime.backend import CallInfo, ChatBackend
from orchrm.runtime.calls import call
from orchrm.runtime.config import RunConfig
from orchrm.runtime.retrieval import Retriever
from orchrm.runtime.trace import CallRecord


@dataclass(frozen=True)
class AgentOutput:
    """A sub-agent's result: its extracted answer and the text downstream agents read."""

    answer: str
    text: str


@dataclass
class AgentContext:
    """What a sub-agent needs to run: the backend, the policy, its own spec, the trace."""

    backend: ChatBackend
    config: RunConfig
    agent: Agent
    trace: list[CallRecord] = field(default_factory=list)
    retriever: Retriever | None = None
    task_id: str = ""
    sample: int = 0

    async def call(self, messages: list[dict], step: str, debate_role: str = "", round: int = 0):
        """One LLM call of this agent, under the run's policy, recorded in the trace."""
        info = CallInfo(
            role="subagent",
            agent_id=self.agent.id,
            agent_type=self.agent.type,
            step=step,
            debate_role=debate_role,
            round=round,
            task_id=self.task_id,
            sample=self.sample,
        )
        return await call(self.backend, messages, info, self.config, self.trace)


def _output(text: str) -> AgentOutput:
    return AgentOutput(prompts.extract_answer(text), text)


def majority(answers: list[str]) -> int:
    """Index of the first answer among the most frequent ones (normalized: case and
    surrounding space ignored). Ties go to the answer seen first."""
    keys = [a.strip().lower() for a in answers]
    counts = Counter(keys)
    best = max(counts.values())
    return next(i for i, k in enumerate(keys) if counts[k] == best)


async def cot_agent(ctx: AgentContext, task: str) -> AgentOutput:
    """One chain-of-thought call."""
    return _output((await ctx.call(prompts.cot(task), "answer")).text)


async def sc_agent(ctx: AgentContext, task: str) -> AgentOutput:
    """`sc_samples` chain-of-thought samples at once, majority vote on their answers."""
    replies = await asyncio.gather(
        *(ctx.call(prompts.cot(task), "answer", round=i) for i in range(ctx.config.sc_samples))
    )
    outputs = [_output(r.text) for r in replies]
    return outputs[majority([o.answer for o in outputs])]


async def debate_agent(ctx: AgentContext, task: str) -> AgentOutput:
    """Every role answers; for `debate_rounds` - 1 more rounds each sees the others'
    latest answers and updates its own; then one final-decision call."""
    roles = list(ctx.agent.debate_roles or ())
    if len(roles) < 2:
        raise ValueError(f"DebateAgent {ctx.agent.id!r} needs two or more roles")
    latest = await asyncio.gather(
        *(ctx.call(prompts.debate_open(task, r), "debate", debate_role=r) for r in roles)
    )
    texts = [c.text for c in latest]
    for round_no in range(1, ctx.config.debate_rounds):
        replies = await asyncio.gather(
            *(
                ctx.call(
                    prompts.debate_round(
                        task, r, texts[i], [(o, texts[j]) for j, o in enumerate(roles) if j != i]
                    ),
                    "debate",
                    debate_role=r,
                    round=round_no,
                )
                for i, r in enumerate(roles)
            )
        )
        texts = [c.text for c in replies]
    final = await ctx.call(
        prompts.debate_decide(task, list(zip(roles, texts, strict=True))), "decide"
    )
    return _output(final.text)


async def reflexion_agent(ctx: AgentContext, task: str) -> AgentOutput:
    """Answer, then up to `reflexion_rounds` of critic and refinement; stops as soon as
    the critic accepts."""
    attempt = (await ctx.call(prompts.cot(task), "answer")).text
    for round_no in range(1, ctx.config.reflexion_rounds + 1):
        verdict = (await ctx.call(prompts.critic(task, attempt), "critic", round=round_no)).text
        if prompts.CRITIC_ACCEPT in verdict:
            break
        attempt = (
            await ctx.call(prompts.refine(task, attempt, verdict), "refine", round=round_no)
        ).text
    return _output(attempt)


async def websearch_agent(ctx: AgentContext, task: str) -> AgentOutput:
    """Up to `search_iterations` turns of choosing a query and reading `search_k`
    results from the retriever, then a summary call that answers from the notes. A first
    reply with neither a query nor `DONE` searches the task's text."""
    notes: list[str] = []
    seen: set[str] = set()
    for round_no in range(ctx.config.search_iterations):
        step = (await ctx.call(prompts.search_step(task, notes), "search", round=round_no)).text
        query = _query(step)
        if query is None and not notes and not _done(step):
            # A reply that neither searches nor says it is done is a model that missed the
            # protocol: the task itself is the first query, as a search box would take it.
            query = task
        if query is None:
            break
        results = ctx.retriever.search(query, ctx.config.search_k) if ctx.retriever else []
        fresh = [d for d in results if d.id not in seen]
        seen.update(d.id for d in fresh)
        notes.append(
            f"Search: {query}\n"
            + ("\n".join(f"- {d.title}: {d.text}" for d in fresh) or "- (no new results)")
        )
    return _output((await ctx.call(prompts.search_summary(task, notes), "summary")).text)


def _query(reply: str) -> str | None:
    """The query in a search-step reply, or None when the model is done."""
    for line in reply.splitlines():
        if line.strip().upper().startswith(prompts.SEARCH_PREFIX):
            query = line.strip()[len(prompts.SEARCH_PREFIX) :].strip()
            return query or None
    return None


def _done(reply: str) -> bool:
    """Whether a search-step reply says the model is done (a line `DONE`)."""
    return any(
        line.strip().upper().rstrip(".") == prompts.SEARCH_DONE for line in reply.splitlines()
    )


SUB_AGENTS: dict[str, Callable[[AgentContext, str], Awaitable[AgentOutput]]] = {
    "CoTAgent": cot_agent,
    "SCAgent": sc_agent,
    "DebateAgent": debate_agent,
    "ReflexionAgent": reflexion_agent,
    "WebSearchAgent": websearch_agent,
}
"""Sub-agent type name (as orchestrations write it) -> implementation."""
require_every_type(SUB_AGENTS, "orchrm.runtime.agents.SUB_AGENTS")
