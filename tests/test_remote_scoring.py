"""Scoring through reward servers (`orchrm.scoring.remote`): every protocol over real loopback
HTTP, backed by a real model (the offline MiniLM, saved untrained: arbitrary but
deterministic scores), gives the local model's scores and token counts; and the failures
a client meets (a busy server, a slow one, none at all, another rendering version)."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from orchrm.errors import ConfigError, OrchrmError
from orchrm.parse import parse_harmony
from orchrm.rmodel.backbone import load_backbone
from orchrm.rmodel.tokens import default_backbone
from orchrm.scoring.base import Scored, Scorer
from orchrm.scoring.load import load_scorer
from orchrm.scoring.local import OrchRM
from orchrm.scoring.remote_http import RemoteError
from orchrm.scoring.remote_protocols import (
    PROTOCOLS,
    apportion,
    logit,
    protocol_of,
    read_pooling,
)
from orchrm.serve.app import create_app, uvicorn_config
from orchrm.serve.config import ServeConfig
from orchrm.training.build import save_model
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks
from tests.loopback_rm import LoopbackRM, sigmoid32

TOLERANCE = 1e-5
"""How far a server's fp32 scores may be from a local fp32 model's."""
BF16_TOLERANCE = 5e-3
"""How far bf16 scores of the same texts may move when they are batched differently (a
batch's padding moves the last of bf16's 8 mantissa bits): docs/remote-scoring.md."""


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory) -> Path:
    import torch

    torch.manual_seed(0)  # the reward head is new: its weights are this seed's
    model, tokenizer = load_backbone(default_backbone())
    meta = {"max_length": 96, "reward_mean": 0.25, "reward_std": 2.0}
    return save_model(model, tokenizer, tmp_path_factory.mktemp("rm") / "model", meta)


@pytest.fixture(scope="module")
def rm(rm_dir) -> OrchRM:
    return OrchRM.load(rm_dir, device="cpu", dtype="fp32")  # fp32: scores compared to 1e-5


@pytest.fixture(scope="module")
def items() -> list[tuple[str, object]]:
    """(question, Orchestration) written by the world's orchestrators for three tasks."""
    found = []
    for task in generate_tasks("math", 3, seed=1):
        for writer in orchestrators(0).values():
            for sample in range(2):
                found.append((task.question, parse_harmony(writer.write(task, sample)[0])))
    return found


@pytest.fixture(scope="module")
def local(rm, items) -> tuple[list[float], list[int]]:
    return scores_and_tokens(rm, items)


def scores_and_tokens(scorer, items) -> tuple[list[float | None], list[int]]:
    """(scores, tokens) of `scorer.score(items)`, in input order."""
    scored = scorer.score(items)
    return [r.score for r in scored], [r.tokens for r in scored]


def scoring_requests(server: LoopbackRM) -> list[dict]:
    """The requests that scored: all but the one activation probe (`use_activation:
    true`, one text of a scoring request) a vLLM scorer sends when every score of its
    first batch lies in (0, 1), which raw scores of an untrained head may. Requests
    arrive in any order, so the probe's text is looked for in every scoring request."""
    probes = [r for r in server.requests if r.get("use_activation") is True]
    scoring = [r for r in server.requests if r.get("use_activation") is not True]
    assert len(probes) <= 1
    for probe in probes:
        assert len(probe["input"]) == 1
        assert any(probe["input"][0] in r["input"] for r in scoring)
    return scoring


def close(a: list[float], b: list[float]) -> float:
    """The largest difference between two score lists of the same length."""
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


# --------------------------------------------------------------------------- protocols


RENDERED_HERE = [p for p in PROTOCOLS if p != "orchrm"]
"""Every protocol whose server reads rendered texts (`orchrm serve`'s `/score` renders
itself: tests/test_serve.py); a protocol added to `PROTOCOLS` is held to this test."""


@pytest.mark.parametrize("kind", RENDERED_HERE)
def test_each_protocol_scores_as_the_local_model(kind, rm, rm_dir, items, local):
    with LoopbackRM(rm, kind) as server:
        scorer = load_scorer(
            rm_dir, server.url, "sglang" if kind == "sglang" else None, batch_size=5, concurrency=2
        )
        scores, tokens = scores_and_tokens(scorer, items)
    assert isinstance(scorer, Scorer)
    assert close(scores, local[0]) < TOLERANCE and tokens == local[1]
    assert len(set(local[0])) > 1  # the scores tell orchestrations apart
    vllm = kind.startswith("vllm")
    field = "input" if vllm else {"sglang": "text"}.get(kind, "query")
    requests = scoring_requests(server) if vllm else server.requests
    sent = [text for r in requests for text in r[field]]
    # rendered here, as the model was trained (requests arrive in any order)
    assert sorted(sent) == sorted(rm.render(q, o) for q, o in items)
    assert len(requests) == math.ceil(len(items) / 5)
    assert len(server.connections) <= 2  # kept-alive, one per request thread
    if vllm:
        assert all(r["use_activation"] is False and "model" not in r for r in requests)
        assert set(server.routes) == {server.url.removeprefix(server.base)}
    if kind == "vllm-pooling":  # the classification head's output, not an embedding
        assert all(r["task"] == "classify" for r in requests)


def test_pooler_logit_mean_and_sigma_are_undone_when_given(rm, rm_dir, items, local):
    """A vLLM server started with `--pooler-config '{"logit_mean": m, "logit_sigma": s}'`
    returns (score - m) / s: read as it is unless the scorer is given the same two."""
    shift = {"logit_mean": 0.75, "logit_sigma": 2.5}
    with LoopbackRM(rm, "vllm-pooling", **shift) as server:
        shifted = scores_and_tokens(load_scorer(rm_dir, server.url), items)[0]
        undone = scores_and_tokens(load_scorer(rm_dir, server.url, **shift), items)[0]
    assert close(shifted, [(s - 0.75) / 2.5 for s in local[0]]) < TOLERANCE
    assert close(undone, local[0]) < TOLERANCE
    with LoopbackRM(rm, "vllm", legacy=True, **shift) as server:  # only probabilities
        scorer = load_scorer(rm_dir, server.url, server_activation="sigmoid", **shift)
        assert close(scores_and_tokens(scorer, items)[0], local[0]) < TOLERANCE
    with pytest.raises(ConfigError, match="logit_sigma cannot be 0"):
        load_scorer(rm_dir, "http://h/pooling", logit_sigma=0.0)
    with pytest.raises(ConfigError, match="protocol openrlhf returns the model's score"):
        load_scorer(rm_dir, "http://h/get_reward", logit_mean=1.0)


def test_a_pooling_answer_per_token_is_refused():
    """A model served for token classification answers a list per token: no reward."""
    answer = {"data": [{"index": 0, "object": "pooling", "data": [[0.1], [0.2]]}]}
    with pytest.raises(RemoteError, match="a score per token for text 0"):
        read_pooling(answer, 1, "none", "http://h/pooling")


def test_a_tokenizer_and_max_length_stand_in_for_the_model_directory(rm, rm_dir, items, local):
    with LoopbackRM(rm, "vllm") as server:
        scorer = load_scorer(rm_url=server.url, tokenizer=str(rm_dir), max_length=96)
        scores, tokens = scores_and_tokens(scorer, items)
    assert close(scores, local[0]) < TOLERANCE and tokens == local[1]
    assert scorer.info.normalize([1.0]) == [1.0]  # no training statistics without orchrm.json


def test_a_token_total_is_split_per_text_in_proportion(rm, rm_dir, items, local):
    with LoopbackRM(rm, "vllm", extra_tokens=1) as server:
        scorer = load_scorer(rm_dir, server.url, batch_size=4)
        _, tokens = scores_and_tokens(scorer, items)
    assert sum(tokens) == sum(local[1]) + len(items)  # what the server says it read
    assert all(0 <= t - n <= 2 for t, n in zip(tokens, local[1], strict=True))
    assert apportion(10, [1, 1, 1]) == [4, 3, 3] and apportion(7, [0, 0]) == [4, 3]
    assert apportion(5, [2, 3]) == [2, 3] and apportion(0, []) == []


class FixedRM:
    """A stand-in model whose scores all lie in (0, 1), as probabilities do."""

    def score_texts(self, texts: list[str]) -> list[Scored]:
        return [Scored(0.1 + 0.8 * (len(t) % 9) / 9, 4) for t in texts]


@pytest.mark.parametrize("kind", ["vllm", "vllm-pooling"])
def test_an_old_vllm_that_ignores_use_activation_is_caught(kind, rm, rm_dir, items, local):
    """vLLM before 0.11.1 drops `use_activation` and returns sigmoid probabilities: the
    first batch's scores all lie in (0, 1), the probe with `use_activation: true` gets
    the same numbers back, and the scorer refuses, naming the server's version."""
    texts = [rm.render(*item) for item in items[:4]]
    with LoopbackRM(rm, kind, legacy=True, version="0.10.1") as server:
        with pytest.raises(RemoteError) as caught:
            load_scorer(rm_dir, server.url).score(items)
        unchecked = load_scorer(rm_dir, server.url, check_activation=False)
        probabilities = [r.score for r in unchecked.score_texts(texts)]
    message = str(caught.value)
    assert f"{server.url} (vLLM 0.10.1) ignores use_activation" in message
    assert "server_activation=sigmoid" in message and "--pooler-config" in message
    assert [r.get("use_activation") for r in server.requests[:2]] == [False, True]
    assert len(server.requests) == 3  # the first batch and its probe; nothing more was sent
    assert all(0 < p < 1 for p in probabilities)
    assert close([logit(p, "test") for p in probabilities], local[0][:4]) < TOLERANCE
    no_version = r"\(its /version does not answer\) ignores"
    with (
        LoopbackRM(FixedRM(), "vllm", legacy=True) as server,
        pytest.raises(RemoteError, match=no_version),
    ):
        load_scorer(rm_dir, server.url).score_texts(texts)


def test_servers_that_give_raw_scores_pass_the_activation_check(rm_dir, items):
    """Raw scores all inside (0, 1) from a server that reads `use_activation` pass after
    one probe; raw scores outside (0, 1) need no probe; a server started with the
    activation off and ignoring the field passes unless all its scores lie in (0, 1)."""
    texts = ["a", "bb", "ccc", "dddd"]
    expected = [r.score for r in FixedRM().score_texts(texts)]
    with LoopbackRM(FixedRM(), "vllm", version="0.11.1") as server:
        scorer = load_scorer(rm_dir, server.url, batch_size=2)
        assert close([r.score for r in scorer.score_texts(texts)], expected) < 1e-6
        scorer.score_texts(texts)  # checked once per scorer
    asked = [(r["input"], r["use_activation"]) for r in server.requests]
    assert asked[:2] == [(texts[:2], False), (texts[:1], True)] and len(asked) == 5
    spread = type(
        "SpreadRM", (), {"score_texts": lambda _, t: [Scored(len(x) - 2.5, 4) for x in t]}
    )
    with LoopbackRM(spread(), "vllm", legacy=True, pooler_activation=False) as server:
        scores = [r.score for r in load_scorer(rm_dir, server.url).score_texts(texts)]
    assert close(scores, [-1.5, -0.5, 0.5, 1.5]) < 1e-6 and len(server.requests) == 1
    with LoopbackRM(FixedRM(), "vllm", legacy=True, pooler_activation=False) as server:
        with pytest.raises(RemoteError, match="check_activation=false keeps scores that are raw"):
            load_scorer(rm_dir, server.url).score_texts(texts)
        kept = load_scorer(rm_dir, server.url, check_activation=False).score_texts(texts)
    assert close([r.score for r in kept], expected) < 1e-6


def test_a_server_that_returns_only_probabilities_is_read_through_logit(rm, rm_dir, items, local):
    with LoopbackRM(rm, "vllm", legacy=True) as server:
        scorer = load_scorer(rm_dir, server.url, server_activation="sigmoid")
        scores, _ = scores_and_tokens(scorer, items)
    assert close(scores, local[0]) < TOLERANCE
    assert all("use_activation" not in r for r in server.requests)  # no probe either
    # float32 probabilities keep ever fewer digits of a score as it grows, none past ~17
    error = {s: abs(logit(sigmoid32(s), "test") - s) for s in (0.5, 5.0, 10.0, 15.0)}
    assert error[0.5] < 1e-6 and error[5.0] < 1e-4 and error[15.0] > 1e-2
    with pytest.raises(RemoteError, match=r"probability 1\.0 cannot be turned back into a score"):
        logit(sigmoid32(20.0), "test")


def test_a_model_with_more_than_one_label_is_refused(rm, rm_dir, items):
    with LoopbackRM(rm, "vllm", labels=2) as server, pytest.raises(RemoteError, match="2 classes"):
        load_scorer(rm_dir, server.url).score(items[:2])


def test_the_protocol_comes_from_the_route_or_is_named():
    assert protocol_of("http://h:8000/classify") == "vllm"
    assert protocol_of("http://h:8000/pooling") == "vllm-pooling"
    assert protocol_of("http://h/rm/get_reward/") == "openrlhf"
    assert protocol_of("https://h/score") == "orchrm"
    assert protocol_of("http://h/anything", "sglang") == "sglang"
    with pytest.raises(ConfigError, match="cannot tell the protocol"):
        protocol_of("http://h:8000/v1")
    with pytest.raises(ConfigError, match="native /classify"):
        load_scorer(rm_url="http://h/v1/classify", protocol="sglang")
    with pytest.raises(ConfigError, match="only apply to scoring through a server"):
        load_scorer("some/dir", protocol="vllm")


# --------------------------------------------------------------------------- failures


def test_busy_answers_are_retried_after_the_servers_retry_after(rm, rm_dir, items, local):
    with LoopbackRM(rm, "vllm", fail_first=2, retry_after="0") as server:
        scorer = load_scorer(rm_dir, server.url, batch_size=64, retries=3, backoff_s=5.0)
        start = time.monotonic()
        scores, _ = scores_and_tokens(scorer, items)
    assert time.monotonic() - start < 3  # Retry-After: 0, not the 5 s backoff
    assert len(scoring_requests(server)) == 3 and close(scores, local[0]) < TOLERANCE
    with LoopbackRM(rm, "vllm", fail_first=9, fail_status=429) as server:
        scorer = load_scorer(rm_dir, server.url, retries=2, backoff_s=0.01)
        with pytest.raises(RemoteError, match=r"failed 3 times; last: HTTP 429"):
            scorer.score(items[:1])
    assert len(server.requests) == 3


def test_a_slow_server_times_out_and_a_missing_one_is_named(rm, rm_dir, items):
    with LoopbackRM(rm, "vllm", delay_s=3) as server:
        scorer = load_scorer(rm_dir, server.url, timeout_s=0.3)
        start = time.monotonic()
        with pytest.raises(OrchrmError, match=r"did not answer within 0\.3 s"):
            scorer.score(items[:1])
        assert time.monotonic() - start < 2
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/classify"
    sock.close()  # nothing listens there now
    message = f"cannot reach the reward server at {url}: connection refused"
    with pytest.raises(OrchrmError, match=re.escape(message)):
        load_scorer(rm_dir, url).score(items[:1])


def test_a_model_trained_on_another_rendering_is_refused(tmp_path, rm_dir):
    (tmp_path / "orchrm.json").write_text(json.dumps({"render_version": "orchrm-rm-text/0"}))
    with pytest.raises(ConfigError, match="trained on rendering 'orchrm-rm-text/0'"):
        load_scorer(tmp_path, "http://127.0.0.1:9/classify")
    assert load_scorer(tmp_path, "http://127.0.0.1:9/classify", check_version=False)


# --------------------------------------------------------------------------- orchrm serve


class Served:
    """`orchrm serve`'s app under uvicorn in a thread, on a free loopback port."""

    def __init__(self, rm: OrchRM, **settings):
        config = ServeConfig(rm="test-model", prepare_workers=1, **settings)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn_config(create_app(rm, config), config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "did not start"
            time.sleep(0.02)

    def post(self, route: str, body: dict) -> tuple[int, dict]:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", int(self.base.rsplit(":", 1)[1]))
        connection.request("POST", route, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        connection.close()
        return response.status, answer

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)


@pytest.fixture(scope="module")
def served(rm):
    server = Served(rm, max_items=8)
    yield server
    server.stop()


def test_orchrm_serve_scores_as_the_local_model_with_or_without_a_tokenizer(
    served, rm, rm_dir, items, local
):
    server_renders = load_scorer(rm_url=f"{served.base}/score", batch_size=4)
    assert not server_renders.renders and server_renders.max_length == 96  # from /healthz
    scores, tokens = scores_and_tokens(server_renders, items)
    assert close(scores, local[0]) < TOLERANCE and tokens == local[1]
    renders_here = load_scorer(rm_dir, f"{served.base}/score", batch_size=4)
    scores, tokens = scores_and_tokens(renders_here, items)  # through /classify
    assert close(scores, local[0]) < TOLERANCE and tokens == local[1]
    unparseable = server_renders.score([(items[0][0], "not an orchestration")])
    assert [r.score for r in unparseable] == [None] and unparseable[0].reason


def test_orchrm_serve_answers_classify_as_vllm_does(served, rm, items, local):
    texts = [rm.render(q, o) for q, o in items[:3]]
    status, answer = served.post("/classify", {"model": "any", "input": texts})
    assert status == 200 and answer["object"] == "list"
    assert [d["index"] for d in answer["data"]] == [0, 1, 2]
    assert all(d["num_classes"] == 1 and len(d["probs"]) == 1 for d in answer["data"])
    probs = [d["probs"][0] for d in answer["data"]]
    assert close(probs, [1 / (1 + math.exp(-s)) for s in local[0][:3]]) < TOLERANCE
    assert answer["usage"]["prompt_tokens"] == sum(local[1][:3])
    status, answer = served.post("/classify", {"input": texts[0], "use_activation": False})
    assert status == 200 and abs(answer["data"][0]["probs"][0] - local[0][0]) < TOLERANCE
    status, answer = served.post("/classify", {"input": texts * 3})
    assert status == 422 and answer["error"] == "too_many_items"
    status, answer = served.post("/classify", {"input": texts, "use_activation": "no"})
    assert status == 422 and answer["field"] == "use_activation"


def test_orchrm_serve_reads_only_the_activation_field_vllm_reads(served, rm, items, local):
    """vLLM 0.16 on ignores the `activation` and `softmax` flags (0.11.1 to 0.15 let them
    win over `use_activation`) and refuses `normalize`: so does `orchrm serve`."""
    text = rm.render(*items[0])
    raw, probability = local[0][0], 1 / (1 + math.exp(-local[0][0]))
    asked = [
        ({"activation": False}, probability),
        ({"softmax": False, "use_activation": None}, probability),
        ({"activation": True, "softmax": True, "use_activation": False}, raw),
    ]
    for fields, expected in asked:
        status, answer = served.post("/classify", {"input": [text], **fields})
        assert status == 200 and abs(answer["data"][0]["probs"][0] - expected) < TOLERANCE
    status, answer = served.post("/classify", {"input": [text], "normalize": False})
    assert (status, answer["error"], answer["field"]) == (422, "removed_field", "normalize")


def test_orchrm_serve_answers_pooling_as_vllm_does(served, rm, rm_dir, items, local):
    texts = [rm.render(q, o) for q, o in items[:2]]
    body = {"input": texts, "task": "classify", "use_activation": False}
    status, answer = served.post("/pooling", body)
    assert status == 200 and answer["object"] == "list" and answer["id"].startswith("pool-")
    assert [(d["index"], d["object"]) for d in answer["data"]] == [(0, "pooling"), (1, "pooling")]
    assert close([d["data"][0] for d in answer["data"]], local[0][:2]) < TOLERANCE
    assert answer["usage"]["prompt_tokens"] == sum(local[1][:2])
    status, answer = served.post("/pooling", {"input": texts[0]})  # task: the model's own
    assert (
        status == 200
        and abs(answer["data"][0]["data"][0] - 1 / (1 + math.exp(-local[0][0]))) < TOLERANCE
    )
    for fields, field in (({"task": "token_classify"}, "task"), ({"task": "score"}, "task")):
        status, answer = served.post("/pooling", {"input": texts, **fields})
        assert status == 422 and answer["field"] == field
    status, answer = served.post("/pooling", {"input": texts, "encoding_format": "base64"})
    assert status == 422 and answer["field"] == "encoding_format"
    scorer = load_scorer(rm_dir, f"{served.base}/pooling", batch_size=4)
    assert scorer.protocol == "vllm-pooling"
    scores, tokens = scores_and_tokens(scorer, items)
    assert close(scores, local[0]) < TOLERANCE and tokens == local[1]


def test_orchrm_serves_get_reward_for_orchestrator_output_not_rendered_text(served, rm_dir, items):
    scorer = load_scorer(rm_dir, f"{served.base}/get_reward")
    with pytest.raises(RemoteError, match="use the same server's /score URL"):
        scorer.score(items[:1])


# --------------------------------------------------------------------------- commands


@pytest.mark.slow  # make test-slow: the commands' run of what test_every_consumer_... checks
def test_score_and_eval_commands_read_a_reward_server_as_the_local_model(
    rm, rm_dir, tmp_path, orchrm_cli
):
    from orchrm.jsonl import write_jsonl
    from orchrm.world.generate import generate

    log = tmp_path / "log.jsonl"
    write_jsonl(generate("math", 3, 4, seed=5, progress=False).records, log)
    local = orchrm_cli("score", str(log), "--rm", str(rm_dir), "--dtype", "fp32")
    assert local.returncode == 0, local.stderr
    with LoopbackRM(rm, "vllm") as server:
        remote = orchrm_cli("score", str(log), "--rm", str(rm_dir), "--rm-url", server.url)
        reports = {}
        here = ["--dtype", "fp32"]  # the server's model scores in fp32
        for name, given in (("local", here), ("remote", ["--rm-url", server.url])):
            out = tmp_path / name
            args = ("eval", str(log), "--samples", "4", "--rm", str(rm_dir), "--out", str(out))
            done = orchrm_cli(*args, *given)
            assert done.returncode == 0, done.stderr
            reports[name] = json.loads((out / "report.json").read_text())
    assert remote.returncode == 0, remote.stderr
    rows = [[json.loads(x) for x in d.stdout.splitlines()] for d in (local, remote)]
    assert [r["task_id"] for r in rows[0]] == [r["task_id"] for r in rows[1]]
    assert close([r["score"] for r in rows[0]], [r["score"] for r in rows[1]]) < TOLERANCE

    def orchrm_rows(report: dict) -> list[tuple]:
        return [
            (r["selector"], r["n"], r["accuracy"], r["verification_tokens"])
            for ev in report["evaluations"]
            for r in ev["results"]
            if r["selector"].startswith("orchrm")
        ]

    assert orchrm_rows(reports["local"]) == orchrm_rows(reports["remote"]) != []
    down = orchrm_cli("score", str(log), "--rm", str(rm_dir), "--rm-url", server.url)
    assert down.returncode == 2 and "cannot reach" in down.stderr


@pytest.mark.slow  # make test-slow: a heavy case of what the suite checks
def test_in_bf16_a_server_scores_as_a_local_model_that_batches_alike(rm_dir, tmp_path, orchrm_cli):
    from orchrm.jsonl import write_jsonl
    from orchrm.world.generate import generate

    log = tmp_path / "log.jsonl"
    write_jsonl(generate("math", 3, 4, seed=5, progress=False).records, log)

    def scores(*args: str) -> list[float]:
        done = orchrm_cli("score", str(log), "--rm", str(rm_dir), *args)
        assert done.returncode == 0, done.stderr
        return [json.loads(line)["score"] for line in done.stdout.splitlines()]

    alone = scores("--dtype", "bf16", "--batch-size", "1")
    batched = scores("--dtype", "bf16", "--batch-size", "32")
    single = scores("--dtype", "fp32", "--batch-size", "1")
    half = OrchRM.load(rm_dir, device="cpu", dtype="bf16", batch_size=1)
    with LoopbackRM(half, "vllm") as server:
        remote = scores("--rm-url", server.url)
        mixed = orchrm_cli("score", str(log), "--rm-url", server.url, "--dtype", "bf16")
    assert remote == alone  # one text a forward pass on both sides: bit for bit
    assert 0 < close(remote, single) < BF16_TOLERANCE  # bf16 is not fp32, and near it
    assert close(remote, batched) < BF16_TOLERANCE
    assert mixed.returncode == 2 and "scores in its own precision" in mixed.stderr


# --------------------------------------------------------------------------- consumers


def test_every_consumer_scores_through_a_server_as_with_the_local_model(
    rm, rm_dir, items, monkeypatch
):
    from orchrm.orchestration import to_harmony
    from orchrm.rl import verl_reward
    from orchrm.rl.rewards import OrchRMReward
    from orchrm.selection.selectors import Candidate, CandidateSet, RewardModelSelector

    tasks = [
        CandidateSet(f"t{k}", q, tuple(Candidate(o) for qq, o in items if qq == q))
        for k, q in enumerate(dict.fromkeys(q for q, _ in items))
    ]
    question = [q for q, _ in items]
    completions = [to_harmony(o) for _, o in items] + ["no plan here"]
    with LoopbackRM(rm, "vllm") as server:
        remote = load_scorer(rm_dir, server.url)
        for task in tasks:
            here, there = RewardModelSelector(rm)(task), RewardModelSelector(remote)(task)
            assert (here.index, here.verification_tokens) == (
                there.index,
                there.verification_tokens,
            )
            assert close(here.scores, there.scores) < TOLERANCE
        rewards = [
            OrchRMReward(scorer)(None, completions, question=[*question, "q"])
            for scorer in (rm, remote)
        ]
        monkeypatch.setenv(verl_reward.RM_URL_ENV, server.url)
        monkeypatch.setenv(verl_reward.RM_PATH_ENV, str(rm_dir))
        verl = verl_reward.compute_score_batch(
            ["math"] * len(items),
            completions[:-1],
            ["1"] * len(items),
            [{"question": q} for q in question],
        )
    assert close(rewards[0], rewards[1]) < TOLERANCE and rewards[0][-1] == -3.0
    assert close([r["score"] for r in verl], rewards[0][:-1]) < TOLERANCE  # normalized


@pytest.mark.parametrize("zone", ["GMT", "+0000", "-0000"])
def test_a_retry_after_date_is_read_in_utc_whatever_the_local_zone(zone, monkeypatch):
    from email.utils import formatdate

    from orchrm.scoring.remote_http import _retry_after_seconds

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: a naive date would be 14 h off
    time.tzset()
    try:
        when = formatdate(time.time() + 30, usegmt=True).replace("GMT", zone)
        assert _retry_after_seconds(when) == pytest.approx(30, abs=2)
    finally:
        monkeypatch.undo()
        time.tzset()
