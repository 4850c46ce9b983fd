"""Serve autoscaling observed: the BM25 API deployment goes from 1 to 2 replicas under load and back to 1 when
idle, with the replica counts read from Serve's own status (serve.status()). Short delays keep it quick."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

pytestmark = pytest.mark.integration

APP, DEPLOYMENT = "autoscale", "squeez-api"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _running(serve) -> int:
    app = serve.status().applications.get(APP)
    deployment = app.deployments.get(DEPLOYMENT) if app else None
    return int((deployment.replica_states or {}).get("RUNNING", 0)) if deployment else 0


def _wait_for(serve, replicas: int, seen: list[int], deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen.append(_running(serve))
        if seen[-1] == replicas:
            return True
        time.sleep(0.5)
    return False


def test_api_scales_out_under_load_and_back_in_when_idle(ray_local):
    from ray import serve

    from squeez_ray.serve.app import build_app

    port = _port()
    serve.shutdown()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    autoscaling = {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 1, "upscale_delay_s": 0.5,
                   "downscale_delay_s": 2, "metrics_interval_s": 0.5, "look_back_period_s": 1}
    serve.run(build_app({"backend": "bm25", "local_batching": {"max_batch_size": 1},
                         "ingress_deployment": {"autoscaling_config": autoscaling, "max_ongoing_requests": 8,
                                                "ray_actor_options": {"num_cpus": 0.1}},
                         "pruner_deployment": {"ray_actor_options": {"num_cpus": 0.1}}}),
              name=APP, route_prefix="/")
    stop = threading.Event()
    body = {"query": "which test failed",
            "tool_output": "\n".join(f"tests/test_{i}.py::test_case PASSED in 0.{i % 10}s" for i in range(20000))}

    def load():
        while not stop.is_set():
            try:
                requests.post(f"http://127.0.0.1:{port}/v1/prune", json=body, timeout=60)
            except requests.RequestException:
                time.sleep(0.1)

    seen: list[int] = []
    try:
        assert _wait_for(serve, 1, seen, 60), seen
        clients = [threading.Thread(target=load, daemon=True) for _ in range(6)]
        for client in clients:
            client.start()
        assert _wait_for(serve, 2, seen, 120), f"no second replica under load; RUNNING seen: {seen}"
        stop.set()
        for client in clients:
            client.join(timeout=60)
        assert _wait_for(serve, 1, seen, 120), f"did not scale back in when idle; RUNNING seen: {seen}"
    finally:
        stop.set()
        serve.delete(APP)
        serve.shutdown()
