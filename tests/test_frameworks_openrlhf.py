"""`orchrm serve`'s /get_reward driven by OpenRLHF's real remote-reward client.

OpenRLHF 0.11's `SingleTurnAgentExecutor` (`openrlhf.utils.agent`, what
`--reward.remote_url` runs) tokenizes the prompt, generates with a vLLM engine, decodes
prompt + response with the policy's tokenizer and posts that one sample to the reward
server, retrying any error 5 times 1 s apart. Only the vLLM engine is imitated here
(`ScriptedEngine`: it answers with the token ids of a plan the world's orchestrators
wrote, as a policy would); the executor, aiohttp, the policy's Hugging Face tokenizer (a
byte-level BPE with a ChatML template, trained here) and `orchrm serve` are real. The
reward model is a tiny seeded Llama (the same weights with and without a calibration in its
orchrm.json), scored in fp32 on both sides.
"""

from __future__ import annotations

import collections
import json
import math
import re
import time
from pathlib import Path

import pytest

agent = pytest.importorskip("openrlhf.utils.agent", reason="openrlhf 0.11 is not installed")
aiohttp = pytest.importorskip("aiohttp", reason="aiohttp (OpenRLHF's HTTP client) is missing")

from orchrm.calibration.methods import PlattCalibration  # noqa: E402
from orchrm.errors import ConfigError  # noqa: E402
from orchrm.experiments.frameworks.drive import world_plans  # noqa: E402
from orchrm.experiments.frameworks.openrlhf_rollout import Posts, chatml_tokenizer, rollout, sample  # noqa: E402
from orchrm.orchestration import RM_RENDER_VERSION  # noqa: E402
from orchrm.rmodel.files import METADATA  # noqa: E402
from orchrm.scoring.local import OrchRM  # noqa: E402
from orchrm.serve.config import ServeConfig, client_networks, is_allowed  # noqa: E402
from orchrm.serve.process import orchrm_serve  # noqa: E402
from tests.samples import tiny_decoder  # noqa: E402
from tests.test_serve import Records, Server, call  # noqa: E402

STORM = 320
"""Single-sample requests posted at once (OpenRLHF: rollout batch x samples per prompt)."""
BROKEN = "<thinking>I will think</thinking> and then stop"  # no agent, no answer
PLATT = PlattCalibration(a=2.0, b=-0.25)


@pytest.fixture(scope="module")
def plans() -> list[tuple[str, str]]:
    return world_plans()


@pytest.fixture(scope="module")
def policy_tokenizer(plans):
    return chatml_tokenizer(plans)


def save_rm(folder: Path, plans, calibration: PlattCalibration | None = None) -> Path:
    """A tiny seeded Llama reward model, with a calibration in its orchrm.json if given."""
    tiny_decoder(folder, [q + " " + p for q, p in plans])
    metadata = {"render_version": RM_RENDER_VERSION, "max_length": 256}
    if calibration is not None:
        metadata["calibration"] = calibration.to_dict()
    (folder / METADATA).write_text(json.dumps(metadata))
    return folder


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory, plans) -> Path:
    return save_rm(tmp_path_factory.mktemp("rm") / "model", plans)


@pytest.fixture(scope="module")
def calibrated_dir(tmp_path_factory, plans) -> Path:
    return save_rm(tmp_path_factory.mktemp("rm") / "calibrated", plans, PLATT)


@pytest.fixture(scope="module")
def rm(rm_dir) -> OrchRM:
    return OrchRM.load(rm_dir, device="cpu", dtype="fp32")


def as_openrlhf_reads(output: dict) -> tuple[float, float, dict[str, float]]:
    """(reward, score, extra logs) of one executor output, read the way OpenRLHF's
    `SamplesGenerator._process_response_into_experience` and its dynamic filter do:
    `torch.tensor([value])`, then `scores[0].item()`."""
    import torch

    reward = torch.tensor([output["reward"]])[0].item()
    score = torch.tensor([output["scores"]])[0].item()
    logs = {k: torch.tensor([v])[0].item() for k, v in output["extra_logs"].items()}
    return reward, score, logs


def counts(metrics: str, name: str, key: str, where: str = "") -> dict[str, int]:
    """The Prometheus counter `name` from /metrics text, by its label `key`, over the
    lines that hold `where` (a label and its value, `route="/get_reward"`)."""
    out: dict[str, int] = collections.Counter()
    for line in metrics.splitlines():
        if line.startswith(name + "{") and where in line:
            label = re.search(rf'{key}="([^"]*)"', line).group(1)
            out[label] += int(float(line.rsplit(" ", 1)[1]))
    return dict(out)


def test_a_rollout_storm_is_answered_on_the_first_try_with_calibrated_scores(
    calibrated_dir, rm, plans, policy_tokenizer, monkeypatch, tmp_path
):
    samples = [
        sample(policy_tokenizer, *plans[i % len(plans)], cut=24 if i % 5 == 0 else 0)
        for i in range(STORM)
    ]
    for i in range(7, STORM, 40):
        samples[i] = sample(policy_tokenizer, plans[0][0], BROKEN)
    expected = {(q, p): r.score for (q, p), r in zip(plans, rm.score(plans), strict=True)}
    with Posts() as posts, orchrm_serve(calibrated_dir, tmp_path / "serve.log") as port:
        start = time.monotonic()
        outputs = rollout(samples, policy_tokenizer, f"http://127.0.0.1:{port}/get_reward")
        seconds = time.monotonic() - start
        metrics = call(port, "GET", "/metrics")[1]
    served = counts(metrics, "orchrm_requests_total", "status", 'route="/get_reward"')
    closed = counts(metrics, "orchrm_connections_closed_total", "reason")
    print(
        f"\n{STORM} requests at once, {posts.peak} in flight: statuses {dict(posts.statuses)}, "
        f"server {served}, connections closed {closed}, {seconds:.1f} s"
    )
    assert posts.peak >= 256 and posts.statuses == {200: STORM}  # every one on the first try
    assert served == {"200": STORM} and not any(closed.values())
    for s, output in zip(samples, outputs, strict=True):
        reward, score, logs = as_openrlhf_reads(output)
        if s.plan == BROKEN:
            assert (reward, score, logs["orchrm_parsed"]) == (-10.0, 0.0, 0.0)
            continue
        assert reward == pytest.approx(expected[(s.question, s.plan)], abs=1e-4)
        assert score == pytest.approx(PLATT.probability([reward])[0], abs=1e-6)
        assert 0 < score < 1 and logs["orchrm_parsed"] == 1.0 and logs["orchrm_tokens"] > 0


def test_uncalibrated_scores_are_the_sigmoid_of_the_reward(rm, plans, policy_tokenizer):
    samples = [sample(policy_tokenizer, *plans[i]) for i in range(0, len(plans), 4)]
    samples.append(sample(policy_tokenizer, plans[0][0], BROKEN))
    with Server(rm) as server:
        outputs = rollout(samples, policy_tokenizer, f"http://127.0.0.1:{server.port}/get_reward")
    read = [as_openrlhf_reads(o) for o in outputs]
    expected = [r.score for r in rm.score([(s.question, s.plan) for s in samples[:-1]])]
    assert [r for r, _, _ in read[:-1]] == pytest.approx(expected, abs=1e-4)
    assert [s for _, s, _ in read[:-1]] == pytest.approx(
        [1 / (1 + math.exp(-r)) for r in expected], abs=1e-6
    )
    assert read[-1][:2] == (-10.0, 0.0)


def test_an_allow_list_serves_its_clients_without_a_key_and_refuses_the_rest(
    rm, plans, policy_tokenizer
):
    body = {"query": ["x"], "prompts": ["x"], "labels": [None]}
    with (
        Server(rm, allow_clients=("10.0.0.0/8", "fd00::/8")) as server,
        Records("orchrm.serve") as log,
    ):
        status, out, _ = server.call("POST", "/get_reward", body)
        assert (status, out["error"]) == (403, "forbidden_client")
        assert "127.0.0.1" in out["message"] and server.call("GET", "/healthz")[0] == 200
    refusals = [r.getMessage() for r in log.records if "refused" in r.getMessage()]
    assert len(refusals) == 1 and "403 forbidden_client" in refusals[0]
    with Server(rm, allow_clients=("127.0.0.0/8",)) as server:
        url = f"http://127.0.0.1:{server.port}/get_reward"
        output = rollout([sample(policy_tokenizer, *plans[0])], policy_tokenizer, url)[0]
    assert as_openrlhf_reads(output)[0] == pytest.approx(rm.score([plans[0]])[0].score, abs=1e-4)


def test_a_non_loopback_bind_without_a_key_needs_an_allow_list():
    with pytest.raises(ConfigError, match=r"refusing to bind '0\.0\.0\.0' without an API key"):
        ServeConfig(host="0.0.0.0")
    ServeConfig(host="0.0.0.0", allow_clients=("10.0.0.0/8", "192.168.1.7", "fd00::/8"))
    for bad in ("10.0.0.0/33", "10.0.0.1/8", "cluster.local", ""):
        with pytest.raises(ConfigError, match=re.escape(f"allow_clients: {bad!r}")):
            ServeConfig(host="0.0.0.0", allow_clients=(bad,))
    networks = client_networks(("10.0.0.0/8", "fd00::1"))
    assert is_allowed("10.9.8.7", networks) and is_allowed("::ffff:10.9.8.7", networks)
    assert is_allowed("fd00::1", networks)
    assert not any(is_allowed(c, networks) for c in ("11.0.0.1", "fd00::2", None, "testclient"))
