"""orchrm.serve: the real HTTP service on a loopback port, called over HTTP.

The reward model is the offline MiniLM saved untrained (its scores are arbitrary but
deterministic, which is all that order and plumbing checks need). Servers run in a
thread of this process (uvicorn with a pre-bound socket), except one `orchrm serve`
process that gets a real SIGTERM.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from orchrm.orchestration import validate
from orchrm.parse import parse_harmony
from orchrm.rmodel.backbone import load_backbone
from orchrm.rmodel.tokens import default_backbone
from orchrm.runtime.prompts import orchestrator
from orchrm.scoring.base import Scored
from orchrm.scoring.local import OrchRM
from orchrm.serve.app import create_app, uvicorn_config
from orchrm.serve.batcher import MicroBatcher
from orchrm.serve.config import ServeConfig, is_loopback
from orchrm.serve.guard import LogLimiter
from orchrm.serve.openrlhf import question_of, read_query
from orchrm.serve.workers import WorkerBusy, WorkerFailed, WorkerPool, WorkerTimeout
from orchrm.training.build import save_model
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks

ORCHRM = Path(sys.executable).with_name("orchrm")
BROKEN = "<thinking>I will think</thinking> and then stop"  # no agent, no answer


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory) -> Path:
    import torch

    torch.manual_seed(0)  # the reward head is new: its weights are this seed's
    model, tokenizer = load_backbone(default_backbone())
    return save_model(model, tokenizer, tmp_path_factory.mktemp("rm") / "model", {"max_length": 96})


@pytest.fixture(scope="module")
def rm(rm_dir) -> OrchRM:
    # fp32 even where bf16 is the default (CPUs with AMX): these tests compare scores
    # across batchings, which bf16 moves in the last bits (tests/test_rm.py covers bf16).
    rm = OrchRM.load(rm_dir, device="cpu", batch_size=32, dtype="fp32")
    rm.score_texts(["warm-up"])  # as `serve` does: the first pass pays one-off costs
    return rm


@pytest.fixture(scope="module")
def world() -> list[tuple[str, str]]:
    """(question, harmony text) written by the world's orchestrators: complete valid plans."""
    plans = []
    for task in generate_tasks("math", 6, seed=1):
        for writer in orchestrators(0).values():
            for sample in range(2):
                text, _ = writer.write(task, sample)
                if "</edge>" in text and not validate(parse_harmony(text)):
                    plans.append((task.question, text))
    return plans


class Server:
    """A uvicorn server for `config` in a background thread, on a free loopback port."""

    def __init__(self, rm: OrchRM, **settings):
        self.config = ServeConfig(rm="test-model", **settings)
        self.app = create_app(rm, self.config)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(self.app, self.config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "server did not start"
            time.sleep(0.02)

    def call(self, method, path, body=None, headers=None, raw=None, chunked=False):
        return call(self.port, method, path, body, headers, raw, chunked)

    def stop(self) -> None:
        self.server.should_exit = True  # what uvicorn's SIGINT/SIGTERM handler sets
        self.thread.join(60)
        assert not self.thread.is_alive()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def call(port, method, path, body=None, headers=None, raw=None, chunked=False):
    """(status, parsed JSON or text, headers) of one HTTP request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if chunked:
        connection.request(method, path, iter([data]), headers or {}, encode_chunked=True)
    else:
        connection.request(method, path, data, headers or {})
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    kind = response.getheader("content-type", "")
    return response.status, json.loads(text) if "json" in kind else text, dict(response.headers)


@pytest.fixture(scope="module")
def server(rm):
    with Server(rm, invalid_penalty=-7.5, max_items=4, max_text_chars=5000) as s:
        yield s


def chatml(question: str) -> str:
    """The orchestrator prompt under a Qwen (ChatML) chat template, as OpenRLHF sends it."""
    system, user = orchestrator(question, "high")
    return (
        f"<|im_start|>system\n{system['content']}<|im_end|>\n"
        f"<|im_start|>user\n{user['content']}<|im_end|>\n<|im_start|>assistant\n"
    )


# --------------------------------------------------------------------------- routes


def test_score_keeps_input_order_and_reports_parse_status(server, rm, world):
    (question, a), (_, b) = world[0], world[3]
    invalid = a.replace("</edge>", "<from>ghost</from><to>nowhere</to></edge>")
    status, out, _ = server.call(
        "POST", "/score", {"question": question, "orchestrations": [a, BROKEN, b, invalid]}
    )
    assert status == 200
    results = out["results"]
    assert [r["status"] for r in results] == ["ok", "unparseable", "ok", "invalid"]
    assert results[1] == {
        "score": -7.5,
        "status": "unparseable",
        "reason": "no_agents",
        "message": results[1]["message"],
        "tokens": 0,
        "p_correct": None,
    }
    assert "edge_unknown_agent" in results[3]["reason"].split(",")
    expected = [r.score for r in rm.score([(question, x) for x in (a, b, invalid)])]
    got = [results[i]["score"] for i in (0, 2, 3)]
    assert got == pytest.approx(expected, abs=1e-4) and expected[0] != pytest.approx(expected[1])
    tokens = rm.tokenizer([rm.render(question, parse_harmony(a))])["input_ids"][0]
    assert results[0]["tokens"] == len(tokens) and out["tokens"] == sum(
        r["tokens"] for r in results
    )


def test_a_model_that_reads_the_domain_is_given_the_requests_domain(rm, world):
    question, text = world[0]
    plan = parse_harmony(text)
    metadata = dict(rm.metadata)
    try:
        rm.metadata = {**metadata, "domain_in_text": True}
        with Server(rm) as s:
            body = {"question": question, "orchestrations": [text]}
            tagged = s.call("POST", "/score", {**body, "domain": "math"})[1]["results"][0]
            plain = s.call("POST", "/score", body)[1]["results"][0]
            status, bad, _ = s.call("POST", "/score", {**body, "domain": 7})
        (scored,) = rm.score([(question, plan, "math")])
        assert tagged["tokens"] == scored.tokens and tagged["score"] == pytest.approx(
            scored.score, abs=1e-4
        )
        assert plain["tokens"] < tagged["tokens"]
        assert status == 422 and bad["field"] == "domain"
    finally:
        rm.metadata = metadata
    with Server(rm) as s:  # a model trained without the line never gets it
        ignored = s.call("POST", "/score", {**body, "domain": "math"})[1]["results"][0]
    assert ignored["tokens"] == plain["tokens"]


def test_select_chooses_the_best_parseable_orchestration(server, rm, world):
    question = world[0][0]
    texts = [BROKEN] + [t for _, t in world[:3]]
    status, out, _ = server.call("POST", "/select", {"question": question, "orchestrations": texts})
    assert status == 200
    scores = [r.score for r in rm.score([(question, t) for t in texts[1:]])]
    assert out["chosen"] == 1 + max(range(len(scores)), key=lambda i: scores[i])
    assert out["scores"][0] == -7.5 and out["scores"][1:] == pytest.approx(scores, abs=1e-4)
    status, out, _ = server.call("POST", "/select", {"question": "q", "orchestrations": [BROKEN]})
    assert status == 200 and out["chosen"] is None


def test_get_reward_speaks_openrlhf_with_and_without_prompts(server, rm, world):
    (q1, a), (q2, b) = world[0], world[-1]
    prompts = [chatml(q1), chatml(q2), chatml(q1)]
    outputs = [a + "<|im_end|>", b + "<|im_end|><|endoftext|>", BROKEN]
    queries = [p + o for p, o in zip(prompts, outputs, strict=True)]
    expected = [r.score for r in rm.score([(q1, a), (q2, b)])]
    for body in (
        {"query": queries, "prompts": prompts, "labels": ["7", "8", "9"]},
        {"query": queries},  # the question comes from the query's own prompt part
        {"query": queries, "prompts": [" " + p for p in prompts]},  # prompt not a prefix
    ):
        status, out, _ = server.call("POST", "/get_reward", body)
        assert status == 200, out
        assert out["rewards"][:2] == pytest.approx(expected, abs=1e-4)
        assert out["rewards"][2] == -7.5 and out["scores"][2] == 0.0  # cannot run: P = 0
        sigmoid = [1 / (1 + math.exp(-r)) for r in out["rewards"][:2]]  # no calibration
        assert out["scores"][:2] == pytest.approx(sigmoid, abs=1e-9)
        assert out["extra_logs"]["orchrm_parsed"] == [1.0, 1.0, 0.0]
        assert out["extra_logs"]["orchrm_valid"] == [1.0, 1.0, 0.0]
        assert all(len(v) == 3 for v in out["extra_logs"].values())


def test_queries_are_read_under_each_chat_template_and_in_plain_text(world):
    question, text = world[0]
    system, user = (m["content"] for m in orchestrator(question, "high"))
    llama = (
        f"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>"
        f"<|start_header_id|>assistant<|end_header_id|>\n\n{text}<|eot_id|>"
    )
    gpt_oss = (
        f"<|start|>system<|message|>{system}<|end|><|start|>user<|message|>{user}<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Plan it.<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{text}<|return|>"
    )
    plain = f"{system}\n\n{user}\n{text}"
    for query, split in (
        (llama, "chat_template"),
        (gpt_oss, "chat_template"),
        (plain, "task_line"),
    ):
        read = read_query(query)
        assert (read.question, read.split) == (question, split)
        assert parse_harmony(read.orchestration) == parse_harmony(text)
    assert read_query(text) == read_query(text, None)  # no prompt, no marker: all output
    assert read_query(text).split == "whole_query" and read_query(text).question == ""
    assert question_of("Solve this, please") == "Solve this, please"  # no Task: line


def test_healthz_and_metrics(server):
    status, out, _ = server.call("GET", "/healthz")
    assert status == 200 and out["status"] == "ok" and out["max_length"] == 96
    server.call("POST", "/score", raw=b"{nope")
    status, text, headers = server.call("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'orchrm_requests_total{route="/healthz",status="200"}' in text
    assert 'orchrm_requests_total{route="/score",status="400"}' in text
    assert 'orchrm_request_duration_seconds_bucket{route="/healthz",le="+Inf"}' in text
    assert "# TYPE orchrm_batch_size histogram" in text and "orchrm_requests_in_flight 1" in text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(len(line.rsplit(" ", 1)) == 2 for line in samples)  # name{labels} value


# --------------------------------------------------------------------------- batching


def concurrently(port: int, bodies: list[dict]) -> list[tuple]:
    out: list = [None] * len(bodies)

    def one(i: int) -> None:
        out[i] = call(port, "POST", "/score", bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def batches(text: str) -> tuple[int, float]:
    """(batches run, orchestrations in them) from the metrics text."""
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("orchrm_b"))
    return int(values["orchrm_batch_size_count"]), float(values["orchrm_batch_size_sum"])


def test_concurrent_requests_share_forward_passes_and_get_their_own_scores(rm, world):
    bodies = [{"question": q, "orchestrations": [t]} for q, t in world[:8]]
    expected = [rm.score([(q, t)])[0].score for q, t in world[:8]]
    for settings, most_batches in (
        ({"max_batch_size": 16, "max_wait_ms": 300}, 4),
        ({"max_batch_size": 1, "max_wait_ms": 0}, 8),
    ):
        with Server(rm, **settings) as s:
            answers = concurrently(s.port, bodies)
            assert [a[0] for a in answers] == [200] * 8
            got = [a[1]["results"][0]["score"] for a in answers]
            assert got == pytest.approx(expected, abs=1e-4)  # each request its own score
            count, items = batches(s.call("GET", "/metrics")[1])
        assert items == 8
        if settings["max_batch_size"] == 1:
            assert count == 8
        else:
            assert count <= most_batches  # 8 requests within 300 ms: a few shared batches


# --------------------------------------------------------------------------- refusals


def test_every_refusal_is_a_clear_json_error(server, world):
    question, text = world[0]

    def refused(body=None, raw=None, chunked=False, path="/score"):
        status, out, _ = server.call("POST", path, body, raw=raw, chunked=chunked)
        assert set(out) == {"error", "message", "field", "request_id"}, out
        return status, out["error"], out["field"]

    assert refused(raw=b'{"question": "q", "orchestrations": [')[:2] == (400, "malformed_json")
    assert refused(raw=b"\xff\xfe\x00")[:2] == (400, "malformed_json")
    deep = b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert refused(raw=deep)[:2] == (400, "malformed_json")
    five = {"question": question, "orchestrations": [text] * 5}
    assert refused(five) == (422, "too_many_items", "orchestrations")
    long = {"question": question, "orchestrations": [text, "x" * 5001]}
    assert refused(long) == (422, "text_too_long", "orchestrations[1]")
    assert refused({"question": "q" * 5001, "orchestrations": []})[1:] == (
        "text_too_long",
        "question",
    )
    assert refused({"question": question, "orchestrations": [text, 3]}) == (
        422,
        "wrong_type",
        "orchestrations[1]",
    )
    assert refused({"question": question, "orchestrations": text})[1:] == (
        "wrong_type",
        "orchestrations",
    )
    assert refused({"orchestrations": [text]})[:2] == (422, "wrong_type")
    assert refused(raw=b"[1, 2]")[:2] == (422, "wrong_type")
    assert refused({"question": "q", "orchestrations": []}, path="/select")[1] == "empty"
    assert refused({"prompts": ["p"]}, path="/get_reward") == (422, "missing_field", "query")
    mismatch = {"query": ["a", "b"], "prompts": ["a"]}
    assert refused(mismatch, path="/get_reward") == (422, "length_mismatch", "prompts")
    assert refused({"query": [None]}, path="/get_reward")[2] == "query[0]"
    status, out, headers = server.call("GET", "/nowhere")
    assert (status, out["error"], out["message"], out["field"]) == (
        404,
        "not_found",
        "Not Found",
        None,
    )
    assert out["request_id"] == headers["x-request-id"]
    assert server.call("GET", "/score")[1]["error"] == "method_not_allowed"


def test_bodies_over_the_limit_get_413_before_parsing(rm):
    with Server(rm, max_body_bytes=1000) as s:
        big = b'{"question": "' + b"q" * 2000 + b'"'  # not even valid JSON: never parsed
        status, out, _ = s.call("POST", "/score", raw=big)
        assert (status, out["error"]) == (413, "body_too_large")
        status, out, _ = s.call("POST", "/score", raw=big, chunked=True)  # no Content-Length
        assert (status, out["error"]) == (413, "body_too_large")
        assert s.call("POST", "/score", {"question": "q", "orchestrations": []})[0] == 200


def test_bearer_token_is_required_except_on_healthz(rm):
    with Server(rm, api_key="s3cret") as s:
        body = {"question": "q", "orchestrations": [BROKEN]}
        status, out, headers = s.call("POST", "/score", body)
        assert (status, out["message"], headers["www-authenticate"]) == (
            401,
            "missing bearer token",
            "Bearer",
        )
        wrong = {"Authorization": "Bearer s3cre"}
        assert s.call("POST", "/score", body, wrong)[1]["message"] == "wrong bearer token"
        assert s.call("GET", "/metrics", headers=wrong)[0] == 401
        assert s.call("GET", "/healthz")[0] == 200
        ok = s.call("POST", "/score", body, {"Authorization": "Bearer s3cret"})
        assert ok[0] == 200 and ok[1]["results"][0]["status"] == "unparseable"
        for given in ("bearer s3cret", "BEARER  s3cret", " Bearer s3cret "):
            assert s.call("POST", "/score", body, {"Authorization": given})[0] == 200, given
        for given in ("Basic s3cret", "Bearers3cret", "Bearer S3CRET", "s3cret"):
            assert s.call("POST", "/score", body, {"Authorization": given})[0] == 401, given


def test_a_non_loopback_bind_needs_a_key_or_insecure():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with pytest.raises(ValueError, match=r"refusing to bind '0\.0\.0\.0' without an API key"):
        ServeConfig(host="0.0.0.0").check()
    ServeConfig(host="0.0.0.0", api_key="k").check()
    ServeConfig(host="0.0.0.0", insecure=True).check()
    with pytest.raises(ValueError, match="max_batch_size"):
        ServeConfig(max_batch_size=0).check()


# --------------------------------------------------------------------------- hostile input


def test_lone_surrogates_are_refused_naming_the_field_and_offset(server, world):
    question, text = world[0]
    cases = (
        ("/score", {"question": question, "orchestrations": [text, "ab\ud800c"]}),
        ("/score", {"question": "x\udfff", "orchestrations": [text]}),
        ("/select", {"question": question, "orchestrations": [text + "\udc00"]}),
        ("/get_reward", {"query": ["fine", "\ud83d"]}),
        ("/get_reward", {"query": ["fine"], "prompts": ["\ud800"]}),
    )
    expected = (
        ("orchestrations[1]", 2),
        ("question", 1),
        ("orchestrations[0]", len(text)),
        ("query[1]", 0),
        ("prompts[0]", 0),
    )
    for (path, body), (field, offset) in zip(cases, expected, strict=True):
        raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as \\udXXX
        status, out, _ = server.call("POST", path, raw=raw)
        assert (status, out["error"], out["field"]) == (422, "invalid_unicode", field), out
        assert f"at character {offset}:" in out["message"]
    pair = {"question": "\ud83d\ude00 " + question, "orchestrations": [text]}  # a valid pair
    assert server.call("POST", "/score", raw=json.dumps(pair).encode())[0] == 200


def fragile(rm: OrchRM):
    """The batcher's scoring (a `Scored` per text), failing on any text holding
    "poison" (as a tokenizer or model can fail on one input) with an internal message
    that must not reach clients."""

    def score_texts(texts: list[str]) -> list[Scored]:
        if any("poison" in t for t in texts):
            raise RuntimeError("tokenizer exploded at 0xdeadbeef")
        return rm.score_texts(texts)

    return score_texts


class Records(logging.Handler):
    """Every record logged to `names` while in use."""

    def __init__(self, *names: str):
        super().__init__()
        self.names, self.records = names, []

    def emit(self, record) -> None:
        self.records.append(record)

    def __enter__(self) -> Records:
        for name in self.names:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        for name in self.names:
            logging.getLogger(name).removeHandler(self)


def test_a_failing_item_fails_only_its_request_and_its_500_hides_the_error(rm, world):
    bodies = [{"question": q, "orchestrations": [t]} for q, t in world[:6]]
    bodies.insert(3, {"question": "poison", "orchestrations": [world[0][1]]})
    with Server(rm, max_batch_size=16, max_wait_ms=300) as s:
        s.app.state.batcher.run_batch = fragile(rm)
        with Records("orchrm.serve") as logs:
            answers = concurrently(s.port, bodies)
        count, _ = batches(s.call("GET", "/metrics")[1])
    assert [a[0] for a in answers] == [200] * 3 + [500] + [200] * 3
    _, out, headers = answers[3]
    assert out["error"] == "internal" and out["request_id"] == headers["x-request-id"]
    assert "0xdeadbeef" not in json.dumps(out) and "RuntimeError" not in json.dumps(out)
    logged = [r for r in logs.records if out["request_id"] in r.getMessage()]
    assert logged and "0xdeadbeef" in logged[0].getMessage()
    expected = [rm.score([(q, t)])[0].score for q, t in world[:6]]
    got = [a[1]["results"][0]["score"] for i, a in enumerate(answers) if i != 3]
    assert got == pytest.approx(expected, abs=1e-4)
    assert count < 7  # they did share a batch, which failed, then ran one by one


def test_a_large_request_does_not_go_first_for_all_its_items():
    async def scenario() -> list[str]:
        order: list[str] = []

        def run(items):
            order.extend(items)
            return items

        batcher = MicroBatcher(run, max_batch_size=4, max_wait_s=0.05)
        batcher.start()
        big = asyncio.ensure_future(batcher.submit([f"big{i}" for i in range(12)]))
        await asyncio.sleep(0)
        small = asyncio.ensure_future(batcher.submit(["small"]))
        assert await small == ["small"] and len(await big) == 12
        await batcher.close()
        return order

    order = asyncio.run(scenario())
    assert order.index("small") < 8  # in the next batch, not after all twelve big items


def test_the_event_loop_answers_while_a_request_runs_past_its_budget(rm, world):
    question, text = world[0]
    padding = "The plan weighs each step with care before the agents run. " * 330
    heavy = text.replace("<thinking>", "<thinking>" + padding, 1)  # ~20 KB each
    body = {"question": question, "orchestrations": [heavy] * 1024}  # ~20 MB of text
    with Server(rm, max_request_seconds=0.5, max_text_chars=30_000) as s:
        result: list = []
        client = threading.Thread(target=lambda: result.append(s.call("POST", "/score", body)))
        start = time.monotonic()
        client.start()
        waits = []
        while client.is_alive() and time.monotonic() - start < 30:
            before = time.monotonic()
            assert s.call("GET", "/healthz")[0] == 200
            waits.append(time.monotonic() - before)
        client.join(30)
        elapsed = time.monotonic() - start
        status, out, _ = result[0]
        assert (status, out["error"]) == (503, "over_budget"), out
        assert "max_request_seconds (0.5 s)" in out["message"]
        assert elapsed < 10 and waits and max(waits) < 2.0
        small = {"question": question, "orchestrations": [text]}
        assert s.call("POST", "/score", small)[0] == 200  # the worker is back (or replaced)


def test_a_job_past_its_deadline_is_answered_at_once_and_its_worker_replaced():
    async def scenario() -> None:
        restarts: list[int] = []
        pool = WorkerPool(1, max_queued=1, on_restart=lambda: restarts.append(1))
        await pool.start()
        loop = asyncio.get_running_loop()
        pid = pool._workers[0].process.pid
        start = loop.time()
        with pytest.raises(WorkerTimeout):
            await pool.run(time.monotonic() + 0.3, time.sleep, 60)
        assert loop.time() - start < 2.0  # answered at the deadline, not after 60 s
        assert await pool.run(time.monotonic() + 30, sum, [1, 2, 3]) == 6
        assert restarts == [1] and pool._workers[0].process.pid != pid
        # one job running, one waiting: a third is turned away at once
        running = asyncio.ensure_future(pool.run(time.monotonic() + 0.5, time.sleep, 0.3))
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(pool.run(time.monotonic() + 5, sum, [1]))
        await asyncio.sleep(0.05)
        with pytest.raises(WorkerBusy):
            await pool.run(time.monotonic() + 5, sum, [2])
        assert await running is None and await waiting == 1
        with pytest.raises(WorkerFailed, match="invalid literal"):
            await pool.run(time.monotonic() + 5, int, "x")
        await pool.close()

    asyncio.run(scenario())


def test_repeated_log_messages_are_rate_limited_with_a_summary():
    limiter = LogLimiter(burst=3, every_s=0.3)
    logger = logging.getLogger("orchrm.test.flood")
    logger.addFilter(limiter)
    with Records("orchrm.test.flood") as logs:
        for i in range(50):
            logger.warning("bad request from client %d", i)
        logger.warning("another kind")
        time.sleep(0.4)
        logger.warning("bad request from client %d", 99)
    logger.removeFilter(limiter)
    messages = [r.getMessage() for r in logs.records]
    assert messages[:3] == [f"bad request from client {i}" for i in range(3)]
    assert messages[3:] == [
        "another kind",
        "bad request from client 99 (suppressed 47 similar messages)",
    ]


def test_openapi_pages_are_served_only_when_asked(server, rm):
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert server.call("GET", path)[0] == 404
    with Server(rm, openapi=True) as s:
        status, out, _ = s.call("GET", "/openapi.json")
        assert status == 200 and "/score" in out["paths"]
        assert s.call("GET", "/docs")[0] == 200


# --------------------------------------------------------------------------- hostile clients


def slow_headers(port: int) -> socket.socket:
    """A connection that has sent part of a request head and no more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def slow_upload(port: int, sent: int = 10, length: int = 1000) -> socket.socket:
    """A connection that has sent a request head and `sent` of `length` body bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n"
    sock.sendall(head.encode() + b"{" * sent)
    return sock


def until_closed(sock: socket.socket, seconds: float, trickle: bytes = b"") -> tuple:
    """(seconds until the server closed `sock` or None, bytes it sent), sending `trickle`
    every 0.2 s meanwhile."""
    start, received = time.monotonic(), b""
    sock.settimeout(0.2)
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(65536)
            if not data:
                return time.monotonic() - start, received
            received += data
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - start, received
        if trickle:
            try:
                sock.sendall(trickle)
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - start, received
    return None, received


def test_a_client_still_uploading_when_answered_reads_the_whole_answer(strict):
    # It keeps sending past the body deadline, bytes the server never reads: a close over
    # unread bytes resets the connection, and a reset can drop the answer unread.
    for _ in range(5):
        with slow_upload(strict.port, length=10**7) as sock:
            closed, received = until_closed(sock, 8, trickle=b"x" * 65536)
        assert closed is not None and 0.8 < closed < 5
        assert received.startswith(b"HTTP/1.1 408 ") and b'"body_timeout"' in received


@pytest.fixture(scope="module")
def strict(rm):
    """A server with 1 s header and body deadlines."""
    with Server(rm, header_timeout_s=1.0, body_timeout_s=1.0) as s:
        yield s


def test_a_slow_client_is_closed_within_the_header_and_body_deadlines(strict):
    with slow_headers(strict.port) as sock:  # a byte every 0.2 s: still too slow
        closed, received = until_closed(sock, 8, trickle=b"X")
    assert closed is not None and 0.8 < closed < 5 and received == b""
    with slow_upload(strict.port) as sock:
        closed, received = until_closed(sock, 8, trickle=b" ")
    assert closed is not None and 0.8 < closed < 5
    assert received.startswith(b"HTTP/1.1 408 ") and b'"body_timeout"' in received
    with socket.create_connection(("127.0.0.1", strict.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # then slow on keep-alive
        closed, received = until_closed(sock, 8, trickle=b"G")
    assert closed is not None and closed < 5 and b"200 OK" in received
    text = strict.call("GET", "/metrics")[1]
    assert 'orchrm_connections_closed_total{reason="header_timeout"} 2' in text


def test_a_client_leaving_mid_body_is_not_an_error(strict):
    with Records("uvicorn.error", "orchrm.serve") as logs:
        sock = slow_upload(strict.port)
        time.sleep(0.2)
        sock.close()
        deadline = time.monotonic() + 10
        while "orchrm_client_disconnects_total 1" not in strict.call("GET", "/metrics")[1]:
            assert time.monotonic() < deadline, "the disconnect was not counted"
            time.sleep(0.1)
    text = strict.call("GET", "/metrics")[1]
    assert 'status="500"' not in text
    assert not [r for r in logs.records if r.levelno >= logging.WARNING or r.exc_info]


def test_the_connection_cap_evicts_waiting_clients_then_refuses(rm):
    with Server(rm, max_connections=3, header_timeout_s=30, body_timeout_s=30) as s:
        served = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)  # keep-alive
        served.request("GET", "/healthz")
        assert served.getresponse().read()
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(2)]
        time.sleep(0.2)
        # at the cap, a new connection makes room: the idle one that never sent a request
        # goes first, not the older one that has completed a request
        assert s.call("GET", "/healthz")[0] == 200
        assert until_closed(idle[0], 5)[0] is not None
        served.request("GET", "/healthz")
        assert served.getresponse().status == 200
        served.close()
        for sock in idle:
            sock.close()
        uploads = [slow_upload(s.port) for _ in range(3)]  # in a request: not evictable
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
            closed, received = until_closed(sock, 5)
        assert closed is not None and received.startswith(b"HTTP/1.1 503 ")
        assert b'"too_many_connections"' in received
        for sock in uploads:
            sock.close()
        time.sleep(0.3)
        text = s.call("GET", "/metrics")[1]
        assert 'orchrm_connections_closed_total{reason="evicted"} 1' in text
        assert 'orchrm_connections_closed_total{reason="refused"} 1' in text


def test_shutdown_does_not_wait_for_slow_clients(rm):
    s = Server(rm, shutdown_timeout_s=30, header_timeout_s=30, body_timeout_s=30)
    clients = [slow_headers(s.port), slow_upload(s.port)]
    time.sleep(0.2)
    start = time.monotonic()
    s.stop()
    assert time.monotonic() - start < 8  # well under the 30 s shutdown timeout
    for sock in clients:
        assert until_closed(sock, 5)[0] is not None
        sock.close()


# --------------------------------------------------------------------------- shutdown


def test_shutdown_lets_an_in_flight_request_finish(rm, world):
    question, text = world[0]
    s = Server(rm, max_batch_size=64, max_wait_ms=1500)  # the request waits in the batcher
    result: list = []
    client = threading.Thread(
        target=lambda: result.append(
            s.call("POST", "/score", {"question": question, "orchestrations": [text]})
        )
    )
    client.start()
    deadline = time.monotonic() + 10
    while not s.app.state.metrics.in_flight:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    s.stop()
    client.join(30)
    assert result[0][0] == 200 and result[0][1]["results"][0]["status"] == "ok"
    with pytest.raises(ConnectionRefusedError):
        call(s.port, "GET", "/healthz")


def test_orchrm_serve_process_refuses_open_binds_and_drains_on_sigterm(rm_dir, world, tmp_path):
    command = [str(ORCHRM)] if ORCHRM.exists() else [sys.executable, "-m", "orchrm"]
    refused = subprocess.run(
        [*command, "serve", "--rm", str(rm_dir), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "ORCHRM_API_KEY"},
    )
    assert refused.returncode == 2 and "refusing to bind" in refused.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["serve", "--rm", str(rm_dir), "--port", str(port), "--max-wait-ms", "1500"]
    args += ["--shutdown-timeout", "20"]
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [*command, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "ORCHRM_API_KEY": "from-env"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None and time.monotonic() < deadline, log.name
            try:
                if call(port, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        question, text = world[0]
        body = {"question": question, "orchestrations": [text]}
        assert call(port, "POST", "/score", body)[0] == 401  # the key came from the env
        result: list = []
        auth = {"Authorization": "Bearer from-env"}
        client = threading.Thread(
            target=lambda: result.append(call(port, "POST", "/score", body, auth))
        )
        client.start()
        slow_head, slow_body = slow_headers(port), slow_upload(port)  # never finish
        time.sleep(0.5)  # the request is now waiting in the 1.5 s batch window
        process.send_signal(signal.SIGTERM)
        start = time.monotonic()
        client.join(30)
        assert result and result[0][0] == 200, result
        # a clean drain exits 0; the slow clients do not hold it for the 20 s timeout
        assert process.wait(30) == 0
        assert time.monotonic() - start < 12
        slow_head.close(), slow_body.close()
        text = Path(log.name).read_text()
        assert "Application shutdown complete" in text
        assert "1 request(s) finished, 0 cut off\n" in text, text  # the upload got its 401
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_forward_passes_are_cut_to_limit_padding_on_a_cpu():
    from orchrm.serve.app import forward_batch_size
    from orchrm.serve.config import ServeConfig

    assert forward_batch_size(ServeConfig(rm="x"), "cpu") == 8
    assert forward_batch_size(ServeConfig(rm="x"), "cuda:0") == 32
    assert forward_batch_size(ServeConfig(rm="x", max_batch_size=4), "cpu") == 4
    assert forward_batch_size(ServeConfig(rm="x", forward_batch_size=16), "cpu") == 16
    with pytest.raises(ValueError, match="forward_batch_size"):
        ServeConfig(rm="x", forward_batch_size=0).check()


def test_prepare_workers_render_as_the_model_does_with_one_tokenization_per_cut(rm, world):
    from orchrm.orchestration import OffsetTokenCounter, render_for_rm
    from orchrm.rmodel.tokens import token_counter
    from orchrm.serve.prepare import Tokens, tokenizer_spec

    tokens = Tokens(tokenizer_spec(rm.tokenizer))
    assert isinstance(tokens.counter, OffsetTokenCounter)  # cuts read token ends
    for question, text in world:
        o = parse_harmony(text)
        long = dataclasses.replace(o, thinking="Ça va, naïve café. " * 200)
        for plan in (o, long):
            for budget in (40, 94):
                expected = render_for_rm(question, plan, budget, token_counter(rm.tokenizer))
                assert render_for_rm(question, plan, budget, tokens.counter) == expected
