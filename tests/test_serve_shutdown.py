"""`orchrm serve` stopped as a service manager stops it, a real process on a free loopback
port with a tiny seeded model: after SIGTERM or SIGINT it answers the requests in flight,
logs how many it finished (and closed unanswered) and how long the drain took, and exits
0; when the shutdown timeout cuts requests off, they get 503 `shutting_down`, the log says
how many and the exit status is the signal's (143 for SIGTERM)."""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from orchrm.serve.process import serve_process
from tests.samples import HIGH_DOM, tiny_decoder

QUESTION = "What is 6 x 7?"
DRAINED = r"shutdown drained in (\d+\.\d\d) s: (\d+) request\(s\) finished, (\d+) cut off"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_decoder(tmp_path_factory.mktemp("rm") / "model", [QUESTION, HIGH_DOM])


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, str]:
    """(status, body text) of one request on the loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def score(port: int) -> tuple[int, str]:
    return call(port, "POST", "/score", {"question": QUESTION, "orchestrations": [HIGH_DOM]})


def in_flight(port: int, wanted: int) -> None:
    """Wait until `wanted` requests are in flight (the /metrics request aside)."""
    deadline = time.monotonic() + 30
    while True:
        metrics = call(port, "GET", "/metrics")[1]
        gauge = int(re.search(r"^orchrm_requests_in_flight (\d+)", metrics, re.M).group(1))
        if gauge - 1 >= wanted:
            return
        assert time.monotonic() < deadline, metrics
        time.sleep(0.05)


def start_requests(port: int, n: int) -> tuple[list[threading.Thread], list]:
    """`n` scoring requests in threads: the threads, and (status or None, body or error)
    of each as it ends."""
    answers: list = []

    def one() -> None:
        try:
            answers.append(score(port))
        except (OSError, http.client.HTTPException) as err:  # the connection dropped
            answers.append((None, repr(err)))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    return threads, answers


def slow_upload(port: int) -> socket.socket:
    """A request whose body never finishes arriving: 10 of its 1,000 bytes sent."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = "POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: 1000\r\n\r\n".encode() + b'{"question')
    return sock


def test_sigterm_drains_the_requests_in_flight_and_exits_0(model, tmp_path):
    log = tmp_path / "serve.log"
    with serve_process(model, log, "--max-wait-ms", "3000", "--shutdown-timeout", "20") as served:
        process, port = served
        assert score(port)[0] == 200  # answered before the signal: not part of the drain
        threads, answers = start_requests(port, 2)  # they wait in the 3 s batch window
        upload = slow_upload(port)  # closed at the signal, not waited for
        in_flight(port, 3)
        process.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(30)
        assert [status for status, _ in answers] == [200, 200], answers
        assert process.wait(30) == 0, log.read_text()
        upload.close()
    drained = re.findall(DRAINED + ", 1 closed unanswered", log.read_text())
    assert len(drained) == 1 and drained[0][1:] == ("2", "0"), log.read_text()
    assert 0 < float(drained[0][0]) < 20


def test_sigint_with_nothing_in_flight_exits_0(model, tmp_path):
    log = tmp_path / "serve.log"
    with serve_process(model, log) as (process, port):
        assert score(port)[0] == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0, log.read_text()
    assert re.findall(DRAINED, log.read_text())[0][1:] == ("0", "0"), log.read_text()


def test_a_drain_cut_short_says_how_many_and_exits_as_the_signal(model, tmp_path):
    log = tmp_path / "serve.log"
    options = ("--max-wait-ms", "10000", "--shutdown-timeout", "1")
    with serve_process(model, log, *options) as (process, port):
        threads, answers = start_requests(port, 1)  # waits 10 s in the batch window
        in_flight(port, 1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 128 + signal.SIGTERM, log.read_text()
        threads[0].join(30)
    assert answers[0][0] == 503 and json.loads(answers[0][1])["error"] == "shutting_down"
    text = log.read_text()
    assert re.findall(DRAINED, text)[0][1:] == ("0", "1"), text
    assert "Traceback" not in text, text  # a cut-off is no error of the service
