"""Which cluster a job joins: its config's address, else RAY_ADDRESS (`ray job submit`), else an
embedded local Ray that carries the job's settings to its workers."""

from __future__ import annotations

import ray

from squeez_ray.ray_init import EMBEDDED_SYSTEM_CONFIG, init_ray, ray_address


def test_address_precedence(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_address() == "local"
    monkeypatch.setenv("RAY_ADDRESS", "http://10.0.0.1:8265")
    assert ray_address() == "http://10.0.0.1:8265"
    assert ray_address("ray://head:10001") == "ray://head:10001"


def _capture(monkeypatch, initialized=False):
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: initialized)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    return calls


def test_local_ray_forwards_job_settings_and_skips_the_dashboard(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    calls = _capture(monkeypatch)
    init_ray()
    (kwargs,) = calls
    assert kwargs["address"] == "local" and kwargs["include_dashboard"] is False
    env = kwargs["runtime_env"]["env_vars"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "UNRELATED_SECRET" not in env
    # idle workers are kept for reuse (a Ray Data round no longer starts its workers again), no metrics
    assert kwargs["_system_config"] == EMBEDDED_SYSTEM_CONFIG
    assert EMBEDDED_SYSTEM_CONFIG["idle_worker_killing_time_threshold_ms"] >= 30_000


def test_submitted_job_joins_its_cluster(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    calls = _capture(monkeypatch)
    init_ray(log_to_driver=True)
    assert calls == [{"address": "http://127.0.0.1:8265", "log_to_driver": True}]


def test_no_second_init(monkeypatch):
    calls = _capture(monkeypatch, initialized=True)
    init_ray()
    assert calls == []


def test_the_embedded_ray_is_recorded_by_the_session_dir_init_returns(monkeypatch):
    """The session directory comes from ray.init's returned context (public), not from ray._private."""
    from types import SimpleNamespace

    from squeez_ray import ray_sessions

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: SimpleNamespace(address_info={"session_dir": "/tmp/ray/s_1"}))
    monkeypatch.setattr(ray_sessions, "reap_stale_sessions", lambda: [])
    recorded = []
    monkeypatch.setattr(ray_sessions, "record_session", recorded.append)
    init_ray()
    assert recorded == ["/tmp/ray/s_1"]


def _failing_init(monkeypatch, errors):
    """ray.init raising each of ``errors`` in turn (then succeeding); returns the calls made."""
    from squeez_ray import ray_sessions

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_sessions, "reap_stale_sessions", lambda: [])
    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
    monkeypatch.setattr(ray, "init", init)
    return calls


# What ray.init raises when the raylet aborted waiting for its dashboard agent (Ray 2.60, seen in CI)
TIMED_OUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                      "failed to startup or the GCS has become overloaded.")


def test_a_node_that_times_out_twice_is_one_job_error(monkeypatch):
    import pytest

    from squeez_ray.errors import JobError
    from squeez_ray.ray_init import RayStartError

    calls = _failing_init(monkeypatch, [TIMED_OUT, TIMED_OUT])
    with pytest.raises(RayStartError, match=r"did not start \(2 tries\).*raylet's log") as raised:
        init_ray()
    assert isinstance(raised.value, JobError) and len(calls) == 2  # the runner prints it as one line, exit 2


def test_other_start_errors_are_not_retried(monkeypatch):
    import pytest

    calls = _failing_init(monkeypatch, [ValueError("bad runtime_env")])
    with pytest.raises(ValueError, match="bad runtime_env"):
        init_ray()
    assert len(calls) == 1


def test_every_embedded_start_gets_the_system_config_unless_it_gives_its_own(monkeypatch):
    """start_local is the one way the jobs and the test session start an embedded Ray."""
    from squeez_ray.ray_init import start_local

    calls = _capture(monkeypatch)
    start_local({"num_cpus": 2})
    start_local({"_system_config": {"enable_metrics_collection": True}})
    assert calls[0] == {"address": "local", "num_cpus": 2, "_system_config": EMBEDDED_SYSTEM_CONFIG}
    assert calls[1]["_system_config"] == {"enable_metrics_collection": True}
