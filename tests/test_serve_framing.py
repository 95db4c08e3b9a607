"""orchrm serve's HTTP framing and refusals as a hostile or careless client meets them,
on a real server on a loopback port: bodies framed by exactly one length (411 without
one, 400 and a closed connection with two), plain messages for numbers too long, unknown
fields and the wrong Authorization scheme, and one log line per refused request with its
request id and reason."""

from __future__ import annotations

import json
import logging
import resource
import socket
import subprocess
import sys
import time

import pytest

from orchrm.serve import guard
from orchrm.serve.guard import _LIMITER
from tests.test_serve import BROKEN, Records, Server, rm, rm_dir  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def server(rm):  # noqa: F811
    with Server(rm, api_key="s3cret") as s:
        yield s


KEY = "Authorization: Bearer s3cret\r\n"
BODY = json.dumps({"question": "q", "orchestrations": [BROKEN]}).encode()


def exchange(port: int, head: str, body: bytes = b"", half_close: bool = False) -> dict:
    """Send a raw request; the status, headers and body of the answer, and whether the
    server closed the connection after it (within 2 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received, closed = b"", False
        sock.settimeout(2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                closed = True
                break
            received += data
            if b"\r\n\r\n" in received:
                top, _, rest = received.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in top.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(rest) >= length[0] and not half_close:
                    sock.settimeout(0.5)  # the whole answer: is the connection closed?
    assert received, "no answer"
    top, _, rest = received.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return {
        "status": int(lines[0].split()[1]),
        "headers": headers,
        "body": json.loads(rest) if rest else None,
        "closed": closed,
    }


def post(path: str = "/score", extra: str = "", version: str = "1.1") -> str:
    return f"POST {path} HTTP/{version}\r\nHost: x\r\n{KEY}{extra}"


def test_a_post_without_a_length_gets_411(server):
    answer = exchange(server.port, post(), BODY)
    assert answer["status"] == 411 and answer["body"]["error"] == "length_required"
    assert answer["body"]["message"] == (
        "a POST body needs a Content-Length header (or Transfer-Encoding: chunked)"
    )
    # HTTP/1.0 with the client's side half-closed after the request: still answered
    answer = exchange(server.port, post(version="1.0"), BODY, half_close=True)
    assert answer["status"] == 411 and answer["closed"]
    ok = exchange(server.port, post(extra=f"Content-Length: {len(BODY)}\r\n", version="1.0"), BODY)
    assert ok["status"] == 200, ok
    ok = exchange(
        server.port,
        post(extra=f"Content-Length: {len(BODY)}\r\n", version="1.0"),
        BODY,
        half_close=True,
    )
    assert ok["status"] == 200 and ok["closed"]


def test_both_content_length_and_transfer_encoding_get_400_and_a_closed_connection(server):
    chunked = f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"
    both = f"Content-Length: {len(BODY)}\r\nTransfer-Encoding: chunked\r\n"
    answer = exchange(server.port, post(extra=both), chunked)
    assert (answer["status"], answer["body"]["error"]) == (400, "conflicting_framing")
    assert answer["headers"]["connection"] == "close" and answer["closed"]
    ok = exchange(server.port, post(extra="Transfer-Encoding: chunked\r\n"), chunked)
    assert ok["status"] == 200 and not ok["closed"]  # chunked alone: kept alive


def test_a_number_too_long_is_said_plainly(server):
    body = b'{"question": "q", "orchestrations": [], "x": ' + b"9" * 100_000 + b"}"
    status, out, _ = server.call(
        "POST", "/score", raw=body, headers={"Authorization": "Bearer s3cret"}
    )
    assert (status, out["error"]) == (400, "malformed_json")
    assert out["message"] == (
        "the body is not valid JSON: number too long: an integer has more than 4,300 "
        "digits (at character 45)"
    )
    assert "set_int_max_str_digits" not in out["message"]


def test_unknown_fields_are_named_on_orchrms_routes_and_ignored_on_others(server):
    key = {"Authorization": "Bearer s3cret"}
    body = {"question": "q", "orchestrations": [BROKEN], "domian": "math"}
    status, out, _ = server.call("POST", "/score", body, key)
    assert (status, out["error"], out["field"]) == (422, "unknown_field", "domian")
    assert out["message"] == (
        "domian is not a field of a /score body: did you mean domain? its fields are "
        "question, orchestrations, domain"
    )
    status, out, _ = server.call("POST", "/select", {**body, "domian": None, "selectr": "x"}, key)
    assert (status, out["field"]) == (422, "domian")
    long = {"question": "q", "orchestrations": [], "k" * 5000: 1}
    status, out, _ = server.call("POST", "/score", long, key)
    assert status == 422 and out["field"] == "k" * 37 + "..." and len(out["message"]) < 200
    # OpenRLHF's and vLLM's shapes: their clients' own fields are accepted
    reward = {"query": [BROKEN], "labels": ["x"], "extra": 1}
    assert server.call("POST", "/get_reward", reward, key)[0] == 200
    classify = {"model": "m", "input": ["text"], "user": "u", "truncate_prompt_tokens": -1}
    assert server.call("POST", "/classify", classify, key)[0] == 200


def test_the_authorization_refusal_says_what_is_wrong_and_never_echoes_a_key(server):
    body = {"question": "q", "orchestrations": [BROKEN]}

    def message(given):
        status, out, headers = server.call("POST", "/score", body, {"Authorization": given})
        assert (status, headers["www-authenticate"]) == (401, "Bearer")
        return out["message"]

    assert message("Basic dXNlcjpwYXNz") == (
        "the Authorization scheme is Basic: send Authorization: Bearer KEY"
    )
    assert message("bearer s3cre") == "wrong bearer token"
    for given in ("s3cret", "Bearers3cret", "Bearer", "x9 s3cret"):
        said = message(given)
        assert said == "Authorization is not Bearer KEY (the word Bearer, a space, the key)"
    assert server.call("POST", "/score", body)[1]["message"] == "missing bearer token"


def test_each_refused_request_is_one_log_line_with_its_id_and_reason(server):
    _LIMITER._buckets.clear()  # earlier tests' refusals share the limiter
    key = {"Authorization": "Bearer s3cret"}
    with Records("orchrm.serve") as logs:
        refusals = [
            server.call("POST", "/score", {"question": "q"}, {"Authorization": "Basic x"}),
            server.call("POST", "/score", {"question": "q", "domian": ""}, key),
            server.call("POST", "/score", raw=b"{", headers=key),
            server.call("GET", "/nowhere", headers=key),
        ]
        no_length = exchange(server.port, post(), BODY)
        time.sleep(0.2)
    ids = [h["x-request-id"] for _, _, h in refusals] + [no_length["headers"]["x-request-id"]]
    lines = [r.getMessage() for r in logs.records if r.levelno == logging.WARNING]
    assert len(lines) == 5, lines
    for rid, line, reason in zip(
        ids,
        lines,
        ("401 unauthorized", "422 unknown_field", "400 malformed_json", "404 not_found",
         "411 length_required"),
        strict=True,
    ):  # fmt: skip
        assert line.startswith(f"request {rid} refused: {reason}: "), line
    assert lines[1].endswith("(POST /score)")
    ok = server.call("POST", "/score", {"question": "q", "orchestrations": []}, key)
    assert ok[0] == 200


def test_a_flood_of_refusals_is_rate_limited_in_the_log(server):
    _LIMITER._buckets.clear()
    with Records("orchrm.serve") as logs:
        for _ in range(30):
            server.call("POST", "/score", {"question": "q"}, {"Authorization": "Basic x"})
    refused = [r for r in logs.records if "refused" in r.getMessage()]
    assert 10 <= len(refused) <= 12  # the limiter's burst, then one every 6 s


def test_the_descriptor_limit_is_raised_to_fit_the_connection_cap():
    """A soft limit of 256 (as some systems start a process with) would cap the server at
    about 140 connections; it is raised to fit 2,048 where the hard limit allows."""
    code = (
        "import resource\n"
        "from orchrm.serve.guard import connection_limits\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "print(connection_limits(2048)[0], resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    cap, soft, hard = (int(v) for v in done.stdout.split())
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard descriptor limit here ({hard}) is below what 2,048 need")
    assert (cap, soft) == (2048, 2048 * 4 // 3 + guard.MAX_ACCEPT_BURST + guard.RESERVED_FDS)
