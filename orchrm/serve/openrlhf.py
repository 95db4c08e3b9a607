"""OpenRLHF's remote reward-model protocol: from its queries to (question, orchestration),
and from orchrm's scores to its answer.

OpenRLHF (`--reward.remote_url http://HOST:PORT/get_reward` in 0.11; `--remote_rm_url`
before) POSTs `{"query": [...], "prompts": [...], "labels": [...]}`, one sample per
request: each query is the prompt the orchestrator saw (chat template applied, special
tokens kept, possibly cut from the left to fit its length budget) followed by what it
wrote; `prompts[i]` is that prompt alone, uncut; labels are ground truths, which a reward
model does not need. It reads back three fields, one number per query in each
(`reward_answer` writes them):
- `rewards`: the reward model's score, or the penalty when the output does not parse;
  the reward OpenRLHF trains on.
- `scores`: in [0, 1], what OpenRLHF's dynamic filtering averages over a prompt's samples
  (`--algo.dynamic_filtering_range`). With a calibrated model (`orchrm calibrate`) the
  calibrated P(correct) of the plan; without one the logistic sigmoid of the reward,
  1 / (1 + exp(-reward)), which orders plans as the reward does but is no probability.
  0 when the output does not parse (it cannot run, so it cannot be right).
- `extra_logs` (logged to wandb): per-query `orchrm_parsed` and `orchrm_valid` (1 or 0)
  and `orchrm_tokens` (the reward model's input tokens).

How a query becomes (question, orchestration), in this order:
1. orchestration: when `prompts[i]` is given and `query[i]` starts with it, the rest of
   `query[i]`. Otherwise the query is split at its first assistant-turn opener of a chat
   template (ChatML `<|im_start|>assistant`, Llama 3, gpt-oss `<|start|>assistant`, Phi,
   DeepSeek, Gemma, Mistral `[/INST]`): the orchestrator prompt has one user turn, so the
   first assistant turn is its output. A query with no chat template is split before the
   first `<thinking>`, `<agent>` or `<answer>` tag after its last `Task:`/`Question:`/
   `Problem:` line (the prompt's own format description holds such tags, but before the
   task); with no such line the whole query is the orchestration.
2. question: from `prompts[i]` when given, else from the prompt part of the split. It is
   the text after the last `Task:`, `Question:` or `Problem:` line of the prompt (what
   `orchrm.runtime.prompts.orchestrator` writes: `Task:\\n{question}` in the user turn),
   searched turn by turn from the last one and ending where its turn ends (at the next
   special token). With no such line, the whole prompt without its special tokens.
3. Chat-template special tokens (`<|...|>`, `<｜...｜>`, `<s>`, `</s>`, `[INST]`,
   `<start_of_turn>`, ...) are removed from the orchestration: a gpt-oss output
   `<|channel|>analysis<|message|>...<|start|>assistant<|channel|>final<|message|>XML`
   becomes `analysis...assistantfinalXML`, the form `parse_harmony` reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from orchrm.store.adapters import question_from_prompt

SPECIAL_TOKEN = re.compile(
    r"<\|[^|<>\s]{1,64}\|>|<｜[^｜<>\s]{1,64}｜>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>|<bos>|<eos>"
)
ASSISTANT_TURN = re.compile(
    r"<\|im_start\|>assistant"
    r"|<\|start_header_id\|>assistant<\|end_header_id\|>"
    r"|<\|start\|>assistant"
    r"|<\|assistant\|>"
    r"|<｜Assistant｜>"
    r"|<start_of_turn>model"
    r"|\[/INST\]"
)
HARMONY_START = re.compile(r"<\s*(?:thinking|agent|answer)\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Query:
    """One OpenRLHF query read as orchrm needs it."""

    question: str
    orchestration: str
    split: str
    """How the orchestration was found: `prompt` (the query starts with its prompt),
    `chat_template`, `task_line`, or `whole_query`."""


def read_query(query: str, prompt: str | None = None) -> Query:
    """The question and the orchestrator output inside an OpenRLHF query (rules in the
    module docstring)."""
    if prompt is not None and query.startswith(prompt):
        head, output, split = prompt, query[len(prompt) :], "prompt"
    else:
        head, output, split = split_query(query)
    question = question_of(prompt if prompt is not None else head)
    return Query(question, SPECIAL_TOKEN.sub("", output).strip(), split)


def split_query(query: str) -> tuple[str, str, str]:
    """(prompt part, output part, how) of a query that is not known to start with its
    prompt."""
    turn = ASSISTANT_TURN.search(query)
    if turn:
        return query[: turn.start()], query[turn.end() :], "chat_template"
    after = question_from_prompt(query)
    if after != query.strip():  # a Task:/Question:/Problem: line was found
        tag = HARMONY_START.search(after)
        if tag:
            at = len(query.rstrip()) - len(after) + tag.start()
            return query[:at], query[at:], "task_line"
    return "", query, "whole_query"


def question_of(prompt: str) -> str:
    """The question in an orchestrator prompt, chat template or not (module docstring)."""
    turns = [t for t in SPECIAL_TOKEN.split(prompt) if t.strip()]
    for turn in reversed(turns):
        question = question_from_prompt(turn)
        if question != turn.strip():  # the turn holds a Task:/Question:/Problem: line
            return question
    return " ".join(t.strip() for t in turns)


class ScoredQuery(Protocol):
    """What `reward_answer` reads of one query's result (`orchrm.serve.prepare.Scored`)."""

    score: float
    status: str
    tokens: int
    p_correct: float | None
    spread: float | None


def reward_answer(results: Sequence[ScoredQuery]) -> dict:
    """The `/get_reward` answer for the scored queries, in their order (module docstring)."""
    return {
        "rewards": [r.score for r in results],
        "scores": [openrlhf_score(r) for r in results],
        "extra_logs": {
            "orchrm_parsed": [float(r.status != "unparseable") for r in results],
            "orchrm_valid": [float(r.status == "ok") for r in results],
            "orchrm_tokens": [float(r.tokens) for r in results],
            **_spreads(results),
        },
    }


def _spreads(results: Sequence[ScoredQuery]) -> dict:
    """`extra_logs`' `orchrm_spread` from an ensemble (an unparseable query's is 0)."""
    if not any(r.spread is not None for r in results):
        return {}
    return {"orchrm_spread": [float(r.spread or 0.0) for r in results]}


def openrlhf_score(result: ScoredQuery) -> float:
    """A query's `scores` entry: P(correct) when the model is calibrated, else the
    sigmoid of its reward; 0 when its output does not parse."""
    if result.status == "unparseable":
        return 0.0
    if result.p_correct is not None:
        return result.p_correct
    return 0.5 * (1.0 + math.tanh(0.5 * result.score))  # the sigmoid, without overflow
