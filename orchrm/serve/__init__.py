"""The HTTP scoring service (`orchrm serve`): a reward model behind FastAPI and uvicorn.

- `config.py`: `ServeConfig`, every setting, and the refusal of an open bind without a key;
- `app.py`: the routes (`/score`, `/select`, `/get_reward`, `/classify`, `/pooling`,
  `/healthz`, `/metrics`), body limits, bearer-token auth, request ids, and the runner;
- `select.py`: `/select`'s selectors from the registry, on the scores of the request;
- `prepare.py`: a request body to scoring work (decode, check, parse, render), run in
  the worker processes of `workers.py`, each job under a deadline, off the event loop;
- `classify.py`: vLLM's `/classify` and `/pooling` protocols, read in a prepare worker
  and answered in vLLM's shape;
- `batcher.py`: micro-batching of concurrent requests into shared forward passes;
- `guard.py`: connection-level guards (header deadline, connection cap, shutdown) and
  the rate limit on repeated log messages;
- `openrlhf.py`: reading OpenRLHF's queries as (question, orchestration);
- `metrics.py`: Prometheus counters and histograms;
- `process.py`: `orchrm serve` in a process of its own on a free loopback port.

Load generation and OpenRLHF's rollout client live with their studies
(`orchrm.experiments.serve_load`, `orchrm.experiments.frameworks`).

`orchrm.cli.serve` is the command.

Nothing heavy is imported here, so `orchrm --help` stays fast.
"""
