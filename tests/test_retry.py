"""orchrm.runtime.retry: the one backoff both the executor and the reward-server client
wait by, and the settings each config hands it."""

from __future__ import annotations

import pytest

from orchrm.errors import ConfigError
from orchrm.runtime.config import RunConfig
from orchrm.runtime.retry import RetryPolicy
from orchrm.scoring.remote import RemoteConfig


def test_the_wait_doubles_per_try_up_to_the_cap():
    policy = RetryPolicy(backoff_s=0.5, max_backoff_s=3.0)
    assert [policy.wait(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_wait_the_other_side_asks_for_replaces_the_backoff_within_the_cap():
    policy = RetryPolicy(backoff_s=5.0, max_backoff_s=10.0)
    assert policy.wait(0, asked=0.0) == 0.0
    assert policy.wait(3, asked=2.5) == 2.5
    assert policy.wait(0, asked=60.0) == 10.0
    assert policy.wait(0, asked=-4.0) == 0.0  # a Retry-After date already past


def test_the_run_config_hands_its_own_names_to_the_policy():
    config = RunConfig(call_timeout_s=7.0, max_retries=2, backoff_s=0.25, backoff_max_s=0.75)
    assert config.retry == RetryPolicy(timeout_s=7.0, retries=2, backoff_s=0.25, max_backoff_s=0.75)
    assert [config.retry.wait(n) for n in range(3)] == [0.25, 0.5, 0.75]
    defaults = RunConfig().retry
    assert (defaults.timeout_s, defaults.retries, defaults.backoff_s) == (300.0, 3, 1.0)
    assert defaults.max_backoff_s == 30.0


def test_a_remote_config_keeps_its_retry_fields_and_positional_url():
    config = RemoteConfig("http://localhost:8000/classify", retries=1, backoff_s=2.0)
    assert config.url.endswith("/classify") and config.retries == 1
    assert (config.timeout_s, config.max_backoff_s) == (60.0, 10.0)
    assert config.wait(1) == 4.0
    for bad in ({"retries": -1}, {"backoff_s": -0.1}, {"timeout_s": 0.0}):
        with pytest.raises(ConfigError, match="retries and backoff_s must be 0 or more"):
            RemoteConfig("http://localhost:8000/classify", **bad).check()
