"""The HTTP scoring service (`orchrm serve`): a reward model behind FastAPI and uvicorn.

- `config.py`: `ServeConfig`, every setting, and the refusal of an open bind without a key;
- `app.py`: the routes (`/score`, `/select`, `/get_reward`, `/healthz`, `/metrics`),
  body limits, bearer-token auth, request ids, and the runner;
- `select.py`: `/select`'s selectors from the registry, on the scores of the request;
- `prepare.py`: a request body to scoring work (decode, check, parse, render), run in
- `workers.py`: worker processes with a deadline per job, off the event loop;
- `batcher.py`: micro-batching of concurrent requests into shared forward passes;
- `guard.py`: connection-level guards (header deadline, connection cap, shutdown) and
  the rate limit on repeated log messages;
- `openrlhf.py`: reading OpenRLHF's queries as (question, orchestration);
- `metrics.py`: Prometheus counters and histograms;
- `command.py`: the `orchrm serve` command.

Nothing heavy is imported here, so `orchrm --help` stays fast.
"""
