"""orchrm.runtime.executor and calls: graph execution, concurrency, retries, failures."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from orchrm.orchestration import Agent, DoM, Edge, Orchestration
from orchrm.runtime.backend import BackendError
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute, execute_many
from tests.scripted_backend import ScriptedBackend

FAST = RunConfig(backoff_s=0.01, call_timeout_s=5)


def cot(agent_id: str, agent_input: str = "") -> Agent:
    return Agent(agent_id, "CoTAgent", input=agent_input)


def graph(*agents: Agent) -> Orchestration:
    edges = tuple(Edge(ref, a.id) for a in agents for ref in a.references())
    return Orchestration(agents=agents, edges=edges, dom=DoM.HIGH)


WIDE = graph(
    cot("A"),
    *(cot(f"B{i}", "part ${A}") for i in range(4)),
    cot("D", " ".join(f"${{B{i}}}" for i in range(4))),
)


def run(o, backend, config=FAST, question="What is 6 x 7?"):
    return asyncio.run(execute(o, question, backend, config))


def test_independent_branches_run_concurrently_in_critical_path_time():
    backend = ScriptedBackend(latency_s=0.2)
    result = run(WIDE, backend)
    assert result.error is None and result.answer == "42"
    assert len(result.calls) == 6  # sum of latencies: 1.2 s
    assert backend.max_in_flight == 4
    # Critical path A -> B -> D is three calls: 0.6 s.
    assert 0.6 <= result.wall_s < 0.9, result.wall_s


def test_inputs_are_substituted_and_composed_with_the_original_task():
    def reply(messages, info):
        return f"Output of {info.agent_id}.\nAnswer: {info.agent_id.lower()}"

    backend = ScriptedBackend(reply)
    o = graph(cot("A"), cot("B", "Check ${A} twice"))
    result = run(o, backend, question="Q?")
    prompts = {info.agent_id: messages[-1]["content"] for messages, info in backend.calls}
    assert prompts["A"] == "Q?"  # empty input: the original question alone
    assert "Original task: Q?" in prompts["B"]
    assert "Check Output of A.\nAnswer: a twice" in prompts["B"]
    assert result.answer == "b" and result.outputs == {"A": "a", "B": "b"}


def test_tokens_come_from_the_backend_and_are_summed():
    result = run(WIDE, ScriptedBackend())
    assert result.prompt_tokens == sum(c.prompt_tokens for c in result.calls) > 0
    assert result.completion_tokens == 6 * 3  # "Reasoning.\nAnswer: 42" is 3 words
    record = result.to_dict()
    assert record["total_tokens"] == result.total_tokens and record["n_calls"] == 6


def test_transient_errors_are_retried_with_backoff():
    def fail(info, attempt):
        return BackendError("503 from server", transient=True, status=503) if attempt < 3 else None

    result = run(graph(cot("A")), ScriptedBackend(fail=fail))
    assert result.error is None and result.calls[0].attempts == 3


def test_permanent_error_fails_the_run_and_stops_dependents():
    def fail(info, attempt):
        return BackendError("400 bad request", transient=False) if info.agent_id == "B0" else None

    backend = ScriptedBackend(fail=fail, latency_s=0.05)
    result = run(WIDE, backend)
    assert result.answer is None
    assert (
        "agent 'B0' (CoTAgent): call failed" in result.error and "400 bad request" in result.error
    )
    assert all(c.agent_id != "D" for _, c in backend.calls)
    assert next(c.error for c in result.calls if c.agent_id == "B0").startswith("400")
    assert result.outputs["A"] == "42"


def test_per_call_timeout_counts_as_transient_and_gives_up_after_retries():
    backend = ScriptedBackend(latency_s=0.3)
    config = RunConfig(call_timeout_s=0.05, max_retries=2, backoff_s=0.01)
    start = time.perf_counter()
    result = run(graph(cot("A")), backend, config)
    assert "timed out after 0.05 s" in result.error and "3 attempt(s)" in result.error
    assert time.perf_counter() - start < 0.5
    assert result.calls[0].attempts == 3


def test_invalid_orchestration_is_not_executed():
    backend = ScriptedBackend()
    o = Orchestration(agents=(cot("A"), cot("A")), dom=DoM.HIGH)
    result = run(o, backend)
    assert result.error.startswith("invalid orchestration") and "declared 2 times" in result.error
    assert backend.calls == []


def test_direct_answer_costs_no_call():
    backend = ScriptedBackend()
    result = run(Orchestration(dom=DoM.LOW, answer="17"), backend)
    assert result.answer == "17" and backend.calls == [] and result.total_tokens == 0


def test_batch_keeps_order_respects_the_limit_and_survives_a_failing_run():
    def fail(info, attempt):
        return BackendError("401 unauthorized", transient=False) if info.task_id == "t3" else None

    backend = ScriptedBackend(latency_s=0.02, fail=fail)
    items = [RunItem(graph(cot("A")), f"Q{n}", task_id=f"t{n}") for n in range(10)]
    config = RunConfig(concurrency=3, backoff_s=0.01)
    results = asyncio.run(execute_many(items, backend, config, progress=False))
    assert len(results) == 10 and backend.max_in_flight <= 3
    assert [r.error is None for r in results] == [n != 3 for n in range(10)]
    assert "401 unauthorized" in results[3].error


def test_the_own_backend_example_in_the_run_guide_runs_as_written(capsys):
    guide = (Path(__file__).parents[1] / "docs" / "run.md").read_text()
    section = guide.split("### Your own backend", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/run.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.split() == ["42", "1", "9"]
