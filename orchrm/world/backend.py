"""The simulated backend: the world plays the sub-agents (and the orchestrator) through
the same `ChatBackend` interface a vLLM server implements.

It reads each call as a real model would receive it: the task from `CallInfo.task_id`,
the sub-task and the upstream agents' outputs from the prompt text, the attempt under
review from the critic's prompt, the facts found so far from the search notes. Whether a
call is right comes from `model.call_logit`; a wrong answer lands on one of the task's
distractors, mostly the main one, so votes can settle on a wrong answer. Replies are
abbreviated (`⟪sim A: 412 tokens⟫` then `Answer: X`) but token counts follow each
sub-agent type's call pattern: completion lengths are drawn per step, and a prompt counts
the simulated length of every output it quotes. Draws are keyed by (seed, orchestrator,
task, sample, agent, step, role, round), so a run is deterministic whatever the order in
which concurrent calls arrive.
"""

from __future__ import annotations

import random
import re

from orchrm.orchestration import approx_token_count
from orchrm.parse import ParseError, parse_harmony
from orchrm.runtime import prompts
from orchrm.runtime.backend import DEFAULT_SAMPLING, BackendError, CallInfo, Completion
from orchrm.runtime.config import RunConfig
from orchrm.world.model import (
    ACCEPT_CORRECT,
    BREAK,
    FOUND_GAIN,
    NOT_FOUND,
    AgentView,
    call_logit,
    needed_facts,
    search_rate,
    sigmoid,
    success_probability,
)
from orchrm.world.tasks import WorldTask

COMPLETION_TOKENS: dict[str, tuple[int, int]] = {
    "answer": (250, 700),
    "debate": (150, 400),
    "decide": (100, 250),
    "critic": (60, 200),
    "refine": (250, 600),
    "search": (15, 40),
    "summary": (120, 300),
}
"""Range of simulated completion lengths per call step (tokens)."""

# World answers are single words (numbers, names, letters): an output quoted mid-line
# ends at the first space or punctuation after it.
_OUTPUT_RE = re.compile(r"⟪sim (\S+): (\d+) tokens⟫\s*\nAnswer: ([^\s,;.]+)")
_SUB_TASK_RE = re.compile(r"Current sub-task: (.*?)\n\nSolve the current sub-task", re.DOTALL)
_FOUND_RE = re.compile(r"Search: fact #\d+")
_ROLE_RE = re.compile(r"^\[(.+?)\]$", re.MULTILINE)
_CANDIDATE_RE = re.compile(
    r"(?:^|\n\n)Candidate (\d+):\n(.*?)(?=\n\nCandidate \d+:\n|\Z)", re.DOTALL
)

JUDGE_NOISE = 0.3
"""Orchestration-level judge: standard deviation of its error on each plan's true success
probability (it picks the plan it rates highest)."""
JUDGE_ACCURACY = 0.85
"""Trajectory-level judge: chance it reads one trajectory's correctness right (it picks
the first trajectory it believes right, else one at random)."""
JUDGE_TOKENS = {"judge-orchestration": (200, 500), "judge-trajectory": (300, 800)}


class WorldBackend:
    """A `ChatBackend` backed by the world's tasks. `orchestrator` (optional) writes the
    plans asked for by orchestrator-role calls; sub-agent calls are simulated."""

    in_process = True
    """Every reply is computed here, without a wait (`ChatBackend`)."""

    def __init__(self, tasks: list[WorldTask], seed: int = 0, orchestrator=None, config=None):
        self.tasks = {t.id: t for t in tasks}
        self.seed = seed
        self.orchestrator = orchestrator
        self.name = getattr(orchestrator, "name", "")
        self.config = config or RunConfig()
        self._judged: dict[tuple[str, str], float] = {}
        """The true success probability of each (task, plan text) a judge has read: an
        evaluation shows the orchestration judge the same plans in many subsets of N."""

    def _rng(self, call: CallInfo) -> random.Random:
        key = (self.seed, self.name, *call.place)
        return random.Random("|".join(map(str, key)))

    async def complete(self, messages, call, sampling=DEFAULT_SAMPLING):
        task = self.tasks.get(call.task_id)
        if task is None:
            raise BackendError(f"world: unknown task {call.task_id!r}", transient=False)
        rng = self._rng(call)
        if call.role == "orchestrator":
            if self.orchestrator is None:
                raise BackendError("world: no orchestrator configured", transient=False)
            text, logprob = self.orchestrator.write(
                task, call.sample, call.extra.get("dom", "high")
            )
            return Completion(text, _count(messages), approx_token_count(text), logprob, self.name)
        if call.role == "judge":
            text, length = self._judge(task, messages, call, rng)
        else:
            text, length = self._play(task, messages, call, rng)
        return Completion(text, _count(messages), length, None, "world")

    def _judge(self, task: WorldTask, messages: list[dict], call: CallInfo, rng: random.Random):
        """Play a judge with the accuracy of JUDGE_NOISE / JUDGE_ACCURACY."""
        candidates = _CANDIDATE_RE.findall(messages[-1]["content"])
        length = rng.randint(*JUDGE_TOKENS.get(call.step, (200, 500)))
        if not candidates:
            return f"⟪sim judge: {length} tokens⟫\nChoice: 0", length
        if call.step == "judge-orchestration":
            estimates = []
            for _, plan in candidates:
                estimates.append(self._plan_probability(task, plan) + rng.gauss(0, JUDGE_NOISE))
            choice = int(candidates[max(range(len(estimates)), key=estimates.__getitem__)][0])
        else:
            believed = []
            for number, text in candidates:
                right = text.rsplit("Final answer: ", 1)[-1].strip() == task.answer
                if (rng.random() < JUDGE_ACCURACY) == right:
                    believed.append(int(number))
            choice = believed[0] if believed else int(rng.choice(candidates)[0])
        return f"⟪sim judge: {length} tokens⟫\nChoice: {choice}", length

    def _plan_probability(self, task: WorldTask, plan: str) -> float:
        """The true success probability of a plan as a judge reads it (0: unreadable)."""
        key = (task.id, plan)
        if key not in self._judged:
            try:
                self._judged[key] = success_probability(task, parse_harmony(plan), self.config)
            except ParseError:
                self._judged[key] = 0.0
        return self._judged[key]

    def _play(self, task: WorldTask, messages: list[dict], call: CallInfo, rng: random.Random):
        content = "\n".join(m["content"] for m in messages)
        length = rng.randint(*COMPLETION_TOKENS.get(call.step, (100, 300)))
        view, right_inputs = _view(task, content, call)
        z = call_logit(task, view, right_inputs)
        if call.step == "critic":
            attempt_right = prompts.extract_answer(messages[-1]["content"]) == task.answer
            accept = ACCEPT_CORRECT if attempt_right else 1 - 0.8 * task.checkable
            verdict = prompts.CRITIC_ACCEPT if rng.random() < accept else "Step 3 is wrong."
            return verdict, length
        if call.step == "refine":
            attempt_right = prompts.extract_answer(messages[2]["content"]) == task.answer
            p = 1 - BREAK if attempt_right else 0.6 * task.checkable
            return self._answer(task, call, rng.random() < p, rng, length), length
        if call.step == "search":
            return _search_step(task, view, content, rng), length
        if call.step == "summary" and task.hops:
            need, _ = needed_facts(task, view.sub_task)
            z += FOUND_GAIN if len(_FOUND_RE.findall(content)) >= need else NOT_FOUND
        return self._answer(task, call, rng.random() < sigmoid(z), rng, length), length

    def _answer(self, task, call, right: bool, rng: random.Random, length: int) -> str:
        value = task.answer if right else rng.choices(task.distractors, task.distractor_weights)[0]
        return f"⟪sim {call.agent_id}: {length} tokens⟫\nAnswer: {value}"


def _count(messages: list[dict]) -> int:
    """Prompt tokens: the text as sent, plus the simulated length of each quoted output."""
    content = "\n".join(m["content"] for m in messages)
    quoted = sum(int(n) for _, n, _ in _OUTPUT_RE.findall(content))
    return approx_token_count(content) + quoted


def _view(task: WorldTask, content: str, call: CallInfo) -> tuple[AgentView, int]:
    """The calling agent as the model sees it, and how many of its inputs were right."""
    match = _SUB_TASK_RE.search(content)
    sub_task = match.group(1) if match else ""
    outputs = {agent: answer for agent, _, answer in _OUTPUT_RE.findall(sub_task)}
    template = " ".join(_OUTPUT_RE.sub(" ", sub_task).split())
    roles = tuple(_ROLE_RE.findall(content)) if call.step == "decide" else (call.debate_role,)
    right = sum(answer == task.answer for answer in outputs.values())
    return AgentView(call.agent_type, roles, template, len(outputs)), right


def _search_step(task: WorldTask, view: AgentView, content: str, rng: random.Random) -> str:
    need, _ = needed_facts(task, view.sub_task)
    found = len(_FOUND_RE.findall(content))
    if found >= need:
        return prompts.SEARCH_DONE
    if rng.random() < search_rate(task, view):
        entity = task.hop_entities[found % len(task.hop_entities)]
        return f"{prompts.SEARCH_PREFIX} fact #{found + 1} about {entity}"
    return f"{prompts.SEARCH_PREFIX} background on the question"
