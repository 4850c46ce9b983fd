"""One rule for how every job joins Ray, so no job attaches to the wrong cluster.

- ``ray job submit``: ``RAY_ADDRESS`` points at the job's cluster; join it (the job's runtime env
  comes with it).
- an explicit address in a job's config: join that.
- otherwise start an embedded local Ray (``address="local"``), never a cluster merely recorded in
  ``/tmp/ray`` by an earlier ``ray start``: that record may be stale, and a stale one makes
  ``ray.init()`` hang. Its workers get the job's ``SQUEEZ_``/``VLLM_``/``HF_`` settings.
"""

from __future__ import annotations

import os

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
        context = ray.init(address="local", include_dashboard=False, log_to_driver=log_to_driver,
                           runtime_env={"env_vars": env} if env else None)
        session_dir = _session_dir(context)
        if session_dir:
            ray_sessions.record_session(session_dir)
    else:
        ray.init(address=target, log_to_driver=log_to_driver)


def _session_dir(context: object) -> str | None:
    """The embedded Ray's session directory, from the context ``ray.init`` returns (its public
    ``address_info``, what Ray's own deprecation notes point to); None where it does not say (a mocked init)."""
    info = getattr(context, "address_info", None)
    session_dir = info.get("session_dir") if isinstance(info, dict) else None
    return str(session_dir) if session_dir else None
