"""orchrm.tasks.run and `orchrm run`: sample, parse, execute, grade, write the log."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from orchrm.runtime.backend import BackendError
from orchrm.runtime.config import RunConfig
from orchrm.tasks.run import RUN_SCHEMA, run_tasks
from orchrm.tasks.task import Task, load_tasks
from tests.conftest import run_orchrm
from tests.loopback_llm import LoopbackLLM
from tests.scripted_backend import ScriptedBackend

AIME = Path(__file__).resolve().parents[2] / "shared" / "data" / "aime" / "aime_2024.jsonl"

PLAN = """<thinking>Solve, then check with self-consistency.</thinking>
<agent><agent_id>Solve</agent_id><agent_name>CoTAgent</agent_name>
<agent_description>Solve it.</agent_description>
<required_arguments><agent_input></agent_input></required_arguments></agent>
<agent><agent_id>Check</agent_id><agent_name>SCAgent</agent_name>
<agent_description>Check it.</agent_description>
<required_arguments><agent_input>Verify: ${Solve}</agent_input></required_arguments></agent>
<edge><from>Solve</from><to>Check</to></edge>"""
CYCLIC = PLAN.replace("</edge>", "<from>Check</from><to>Solve</to></edge>")
PLANS = [PLAN, CYCLIC, "I would rather not plan."]  # valid, invalid, unparseable


def scripted_llm():
    """Each task's orchestrator calls get the three plans in turn (whatever the order of
    the tasks' requests); sub-agents answer 204."""
    seen: Counter = Counter()
    lock = threading.Lock()  # the server answers each request on its own thread

    def reply(request: dict) -> str:
        system, task = (m["content"] for m in request["messages"][:2])
        if system.startswith("You design"):
            with lock:
                seen[task] += 1
                n = seen[task]
            return PLANS[(n - 1) % len(PLANS)]
        return "Walk at 3 km/h ...\nAnswer: 204"

    return LoopbackLLM(reply=reply, listed_models=("orch-model", "sub-model"))


def test_load_tasks_reads_aime_and_reports_bad_lines(tmp_path):
    if not AIME.exists():
        pytest.skip(f"{AIME} is absent: the shared data folder is not beside this checkout")
    tasks = load_tasks(AIME)
    assert len(tasks) == 30 and tasks[0].id == "2024-I-1" and tasks[0].answer == "204"
    assert len(load_tasks(AIME, limit=3)) == 3
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"question": "ok"}\n{"answer": 1}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:2: no question"):
        load_tasks(bad)
    bad.write_text("{oops\n")
    with pytest.raises(ValueError, match=r"t.jsonl:1: invalid JSON"):
        load_tasks(bad)


def test_orchrm_run_against_a_loopback_server_writes_complete_records(tmp_path):
    if not AIME.exists():
        pytest.skip(f"{AIME} is absent: the shared data folder is not beside this checkout")
    out = tmp_path / "run.jsonl"
    with scripted_llm() as server:
        command = ["run", "--tasks", str(AIME)]
        command += ["--limit", "2", "--samples", "3", "--base-url", server.base_url]
        command += ["--model", "sub-model", "--orchestrator-model", "orch-model", "--out", str(out)]
        done = run_orchrm(*command, columns=120)
        requests = list(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "orchestration samples" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6 and all(r["schema"] == RUN_SCHEMA for r in records)
    by_kind = {
        "valid": [r for r in records if r["orchestration"] and not r["violations"]],
        "invalid": [r for r in records if r["violations"]],
        "unparseable": [r for r in records if r["parse_error"]],
    }
    assert {k: len(v) for k, v in by_kind.items()} == {"valid": 2, "invalid": 2, "unparseable": 2}
    for r in by_kind["valid"]:
        execution = r["execution"]
        assert execution["error"] is None and r["answer"] == "204"
        assert [c["agent_id"] for c in execution["calls"]] == ["Solve"] + ["Check"] * 5
        # Tokens are the server's usage (the stand-in counts words), summed per run.
        assert execution["prompt_tokens"] == sum(
            sum(len(m["content"].split()) for m in c["messages"]) for c in execution["calls"]
        )
        assert r["tokens"]["total"] == r["tokens"]["orchestrator"] + execution["total_tokens"]
        assert r["orchestrator_logprob"] < 0 and r["raw"] == PLAN
    # 2024-I-1's answer is 204; 2024-I-2's is 25: grading compares with ground truth.
    assert {r["task_id"]: r["correct"] for r in by_kind["valid"]} == {
        "2024-I-1": True,
        "2024-I-2": False,
    }
    for r in by_kind["invalid"] + by_kind["unparseable"]:
        assert r["execution"] is None and r["answer"] is None and r["correct"] is False
    assert by_kind["unparseable"][0]["parse_error"]["reason"] == "no_orchestration"
    assert by_kind["invalid"][0]["violations"][0]["rule"] == "cycle"
    # The orchestrator and the sub-agents were routed to their own models.
    models = {r["messages"][0]["content"].startswith("You design"): r["model"] for r in requests}
    assert models == {True: "orch-model", False: "sub-model"}


def test_failed_orchestrator_calls_are_recorded_not_lost():
    def fail(info, attempt):
        second_sample = info.role == "orchestrator" and info.sample == 1
        return BackendError("401 unauthorized", transient=False) if second_sample else None

    backend = ScriptedBackend(
        reply=lambda m, i: PLAN if i.role == "orchestrator" else "Answer: 5", fail=fail
    )
    tasks = [Task("t1", "What is 2 + 3?", "5")]
    records = asyncio.run(run_tasks(tasks, backend, samples=2, config=RunConfig(), progress=False))
    assert [r["sample_index"] for r in records] == [0, 1]
    assert records[0]["correct"] is True
    assert records[1]["parse_error"]["reason"] == "orchestrator_failed"
    assert "401 unauthorized" in records[1]["parse_error"]["message"]


def test_orchrm_run_stops_at_once_when_the_server_is_not_there(tmp_path, orchrm_cli):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "What is 2 + 2?", "answer": "4"}\n')
    out = tmp_path / "run.jsonl"
    with LoopbackLLM() as server:
        dead = server.base_url  # the port is free again once the server has stopped
    done = orchrm_cli("run", "--tasks", str(tasks), "--base-url", dead, "--out", str(out))
    assert done.returncode == 2
    assert "cannot reach the LLM server at " + dead in done.stderr
    assert not out.exists()


def test_orchrm_run_names_a_model_the_server_does_not_serve(tmp_path, orchrm_cli):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "What is 2 + 2?", "answer": "4"}\n')
    with LoopbackLLM(listed_models=("Qwen/Qwen3-8B",)) as server:
        command = ["run", "--tasks", str(tasks), "--base-url", server.base_url]
        done = orchrm_cli(*command, "--out", str(tmp_path / "run.jsonl"))
        assert not server.requests  # nothing was sampled
    assert done.returncode == 2
    assert "does not serve 'default'; it serves Qwen/Qwen3-8B" in done.stderr
