"""orchrm.runtime.agents, prompts and retrieval: each sub-agent's call pattern and answer."""

from __future__ import annotations

import asyncio

import pytest

from orchrm.orchestration import Agent, DoM, Orchestration
from orchrm.runtime import prompts
from orchrm.runtime.agents import majority
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import execute
from orchrm.runtime.retrieval import BM25Retriever, Document, load_corpus
from tests.scripted_backend import ScriptedBackend


def run_one(agent: Agent, backend, config=None, retriever=None):
    o = Orchestration(agents=(agent,), dom=DoM.HIGH)
    return asyncio.run(execute(o, "Q?", backend, config or RunConfig(), retriever=retriever))


def test_cot_is_one_call():
    result = run_one(Agent("A", "CoTAgent"), ScriptedBackend())
    assert [c.step for c in result.calls] == ["answer"] and result.answer == "42"


def test_sc_votes_over_its_samples():
    replies = iter(["Answer: 7", "Answer: 9", "Answer: 9", "Answer: 7", "Answer: 9"])
    backend = ScriptedBackend(lambda m, i: next(replies))
    result = run_one(Agent("A", "SCAgent"), backend)
    assert len(result.calls) == 5 and result.answer == "9"
    assert (
        len(run_one(Agent("A", "SCAgent"), ScriptedBackend(), RunConfig(sc_samples=3)).calls) == 3
    )


def test_debate_is_roles_times_rounds_plus_a_decision():
    backend = ScriptedBackend(lambda m, i: f"{i.debate_role or 'judge'} says\nAnswer: 5")
    agent = Agent("D", "DebateAgent", debate_roles=("Prover", "Skeptic", "Checker"))
    result = run_one(agent, backend, RunConfig(debate_rounds=2))
    assert len(result.calls) == 3 * 2 + 1 and result.calls[-1].step == "decide"
    later = [m for m, i in backend.calls if i.step == "debate" and i.round == 1]
    # In later rounds each debater sees the others, not itself.
    skeptic = next(m for m, i in backend.calls if i.debate_role == "Skeptic" and i.round == 1)
    assert "[Prover]" in skeptic[-1]["content"] and "[Skeptic]" not in skeptic[-1]["content"]
    assert len(later) == 3
    default = run_one(agent, ScriptedBackend())
    assert len(default.calls) == 3 * 5 + 1  # MAS-Orchestra's 5 rounds


@pytest.mark.parametrize(
    ("accept_at", "calls", "answer"), [(1, 2, "0"), (3, 6, "2"), (None, 11, "5")]
)
def test_reflexion_stops_when_the_critic_accepts(accept_at, calls, answer):
    def reply(messages, info):
        if info.step == "critic":
            return prompts.CRITIC_ACCEPT if info.round == accept_at else "Step 2 is wrong."
        return f"attempt {info.round}\nAnswer: {info.round}"

    result = run_one(Agent("R", "ReflexionAgent"), ScriptedBackend(reply))
    assert len(result.calls) == calls
    assert result.answer == answer  # the attempt the critic accepted (or the last one)


def test_websearch_reads_the_retriever_then_summarizes():
    corpus = BM25Retriever(
        [
            Document("d1", "The Eiffel Tower is 330 metres tall.", "Eiffel Tower"),
            Document("d2", "Bananas are rich in potassium.", "Banana"),
        ]
    )

    def reply(messages, info):
        if info.step == "search":
            return "SEARCH: eiffel tower height" if info.round == 0 else "DONE"
        return "Answer: 330 metres"

    backend = ScriptedBackend(reply)
    result = run_one(Agent("W", "WebSearchAgent"), backend, retriever=corpus)
    assert [c.step for c in result.calls] == ["search", "search", "summary"]
    summary_prompt = backend.calls[-1][0][-1]["content"]
    assert "330 metres tall" in summary_prompt and "potassium" not in summary_prompt
    assert result.answer == "330 metres"


@pytest.mark.parametrize(
    ("first", "searched"),
    [("The tower is tall, I think.", True), ("DONE", False), ("SEARCH: bananas", False)],
)
def test_a_first_reply_off_the_protocol_searches_the_task_itself(first, searched):
    corpus = BM25Retriever(
        [
            Document("d1", "The Eiffel Tower is 330 metres tall.", "Eiffel Tower"),
            Document("d2", "Bananas are rich in potassium.", "Banana"),
        ]
    )

    def reply(messages, info):
        if info.step == "search":
            return first if info.round == 0 else "I do not know."
        return "Answer: x"

    o = Orchestration(agents=(Agent("W", "WebSearchAgent"),), dom=DoM.HIGH)
    backend = ScriptedBackend(reply)
    asyncio.run(execute(o, "How tall is the Eiffel Tower?", backend, RunConfig(), retriever=corpus))
    summary_prompt = backend.calls[-1][0][-1]["content"]
    assert ("330 metres tall" in summary_prompt) == searched
    # Only the first reply falls back: a later one off the protocol ends the search.
    assert [c[1].step for c in backend.calls].count("search") == (1 if first == "DONE" else 2)


def test_websearch_stops_after_its_iteration_budget():
    backend = ScriptedBackend(
        lambda m, i: "SEARCH: anything" if i.step == "search" else "Answer: x"
    )
    result = run_one(Agent("W", "WebSearchAgent"), backend, RunConfig(search_iterations=3))
    assert [c.step for c in result.calls] == ["search"] * 3 + ["summary"]


def test_bm25_ranks_by_relevance_and_loads_jsonl(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"id": "a", "title": "Paris", "text": "Paris is the capital of France."}\n'
        '{"id": "b", "text": "Berlin is the capital of Germany. Berlin Berlin."}\n'
        '{"id": "c", "text": "Cats sleep a lot."}\n'
    )
    retriever = load_corpus(path)
    assert [d.id for d in retriever.search("capital of Germany Berlin", 5)] == ["b", "a"]
    assert retriever.search("dogs", 5) == []
    path.write_text('{"id": "a"}\n')
    with pytest.raises(ValueError, match=r"corpus.jsonl:1"):
        load_corpus(path)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Work...\nAnswer: 204", "204"),
        ("**Answer:** 25.", "25"),
        ("first Answer: 1\nthen\nanswer: 2", "2"),
        ("so the result is \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("no marker\n\n  last line  \n", "last line"),
        ("", ""),
    ],
)
def test_extract_answer(text, answer):
    assert prompts.extract_answer(text) == answer


def test_majority_ties_go_to_the_first_seen():
    assert majority(["a", "B", "b", "A"]) == 0
    assert majority(["x", "y", "y"]) == 1


def test_orchestrator_prompts_state_the_format():
    high = prompts.orchestrator("Q?", "high")
    assert "<edge>" in high[0]["content"] and "${X}" in high[0]["content"]
    assert "<agent_output_id>" in prompts.orchestrator("Q?", "low")[0]["content"]
    with pytest.raises(ValueError):
        prompts.orchestrator("Q?", "medium")
