"""The HTTP scoring service (`orchrm serve`): a reward model behind FastAPI and uvicorn.

- `config.py`: `ServeConfig`, every setting, and the refusal of an open bind without a key;
- `app.py`: the routes (`/score`, `/select`, `/get_reward`, `/healthz`, `/metrics`),
  limits, bearer-token auth, and the runner;
- `batcher.py`: micro-batching of concurrent requests into shared forward passes;
- `openrlhf.py`: reading OpenRLHF's queries as (question, orchestration);
- `metrics.py`: Prometheus counters and histograms;
- `command.py`: the `orchrm serve` command.

Nothing heavy is imported here, so `orchrm --help` stays fast.
"""
