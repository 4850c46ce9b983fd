"""One rule for how every job joins Ray, so no job attaches to the wrong cluster.

- ``ray job submit``: ``RAY_ADDRESS`` points at the job's cluster; join it (the job's runtime env
  comes with it).
- an explicit address in a job's config: join that.
- otherwise start an embedded local Ray (``address="local"``), never a cluster merely recorded in
  ``/tmp/ray`` by an earlier ``ray start``: that record may be stale, and a stale one makes
  ``ray.init()`` hang. Its workers get the job's ``SQUEEZ_``/``VLLM_``/``HF_`` settings.

An embedded Ray whose node does not come up is started once more. Ray 2.60's raylet gives its
dashboard agent a fixed 15 s to write its port file and then aborts (no setting changes that: the
wait is hard-coded in node_manager.cc), and on a loaded 2-core machine the agent's Python start-up
alone took 28 s. ``ray.init`` then raises a bare ``Exception`` ("timed out during startup") and leaves
that attempt's GCS and agents running; they are stopped before the second try, which finds the
agent's modules warm. A second failure is a ``RayStartError``: one line, exit 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

from squeez_ray.errors import JobError

log = logging.getLogger(__name__)

# The embedded Ray's own settings (Ray's RayConfig, passed as ``_system_config``). Ray kills a worker
# process that sits idle for 1 s once more than num_cpus of them are idle; a Ray Data stage of
# fractional-CPU tasks runs ~10 at once on 2 cores, so each stage and each labelling round started
# its workers again (~2.5 s of CPU apiece, importing ray.data and the job's modules). Kept for a
# minute they are reused: the HTTP-teacher labelling tests took 168 s and started 61 workers, then
# 86 s and 28 (tests/bench/bench_worker_reuse.py measures it). Metrics collection feeds the dashboard,
# which the embedded Ray does not start: off, it stops a periodic scan of every worker process.
EMBEDDED_SYSTEM_CONFIG = {"idle_worker_killing_time_threshold_ms": 60_000, "enable_metrics_collection": False}

# Settings the job's own code reads inside Ray workers (engine choice, vLLM's KV cache, offline hub).
FORWARDED_ENV_PREFIXES = ("SQUEEZ_", "VLLM_", "HF_", "RAY_AUTH", "TOKENIZERS")


def ray_address(explicit: str | None = None) -> str:
    """The address a job should use: its config's, else ``RAY_ADDRESS``, else ``"local"``."""
    return explicit or os.environ.get("RAY_ADDRESS") or "local"


def init_ray(address: str | None = None, *, log_to_driver: bool = False) -> None:
    """Start or join Ray once per process by the rule above; a no-op when Ray is already up."""
    import ray

    if ray.is_initialized():
        return
    target = ray_address(address)
    if target == "local":
        from squeez_ray import ray_sessions

        ray_sessions.reap_stale_sessions()  # agents a SIGKILLed job's Ray left holding ports
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
        context = start_local(dict(include_dashboard=False, log_to_driver=log_to_driver,
                                    runtime_env={"env_vars": env} if env else None))
        session_dir = _session_dir(context)
        if session_dir:
            ray_sessions.record_session(session_dir)
    else:
        ray.init(address=target, log_to_driver=log_to_driver)


class RayStartError(JobError):
    """The embedded Ray's node did not start, twice."""


NODE_START_TIMEOUT = "timed out during startup"  # what ray.init raises when the raylet dies at start


def start_local(kwargs: dict[str, Any], attempts: int = 2) -> Any:
    """``ray.init(address="local", **kwargs)`` with ``EMBEDDED_SYSTEM_CONFIG`` unless ``kwargs`` gives its own,
    again after a node that timed out during start-up."""
    import psutil
    import ray

    kwargs = {"_system_config": EMBEDDED_SYSTEM_CONFIG, **kwargs}
    for attempt in range(1, attempts + 1):
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        try:
            return ray.init(address="local", **kwargs)
        except Exception as error:  # noqa: BLE001 - Ray raises a bare Exception for this; others re-raised
            if NODE_START_TIMEOUT not in str(error):
                raise
            logs = _stop_new_children(before)
            if attempt == attempts:
                raise RayStartError(
                    f"the embedded Ray's node did not start ({attempts} tries): its raylet waits 15 s for its "
                    f"dashboard agent, which a loaded machine can exceed; the raylet's log: {logs}") from error
            log.warning("the embedded Ray's node timed out during start-up (a slow dashboard agent on a "
                        "loaded machine; raylet log %s); starting it once more", logs)
    raise AssertionError("unreachable")


def _stop_new_children(before: set[int]) -> str:
    """Stop the processes a failed ``ray.init`` started (not in ``before``); return its raylet's log path."""
    import psutil

    from squeez_ray.ray_sessions import stop_processes

    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    logs = "unknown"
    for proc in started:
        with contextlib.suppress(psutil.Error):
            for arg in proc.cmdline():
                if arg.startswith("--session-dir="):  # the log monitor and dashboard say it
                    logs = os.path.join(arg.split("=", 1)[1], "logs", "raylet.out")
    stop_processes(started, grace_s=5)
    return logs


def _session_dir(context: object) -> str | None:
    """The embedded Ray's session directory, from the context ``ray.init`` returns (its public
    ``address_info``, what Ray's own deprecation notes point to); None where it does not say (a mocked init)."""
    info = getattr(context, "address_info", None)
    session_dir = info.get("session_dir") if isinstance(info, dict) else None
    return str(session_dir) if session_dir else None
