"""Serve autoscaling observed where the work is done: the pruner deployment of serve_configs/baseline.yaml, with
that file's own autoscaling bounds and target (the API stays at its one replica, as shipped), goes from 1 to 2
replicas under load and back to 1 when idle, the counts read from Serve's own status (serve.status()). Only the
delays and metric intervals are shortened, to keep it quick."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

pytestmark = pytest.mark.integration

APP = "autoscale"
REPO = Path(__file__).resolve().parents[2]
FAST = {"upscale_delay_s": 0.5, "downscale_delay_s": 2, "metrics_interval_s": 0.5, "look_back_period_s": 1}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _running(serve, deployment: str) -> int:
    app = serve.status().applications.get(APP)
    status = app.deployments.get(deployment) if app else None
    return int((status.replica_states or {}).get("RUNNING", 0)) if status else 0


def _wait_for(serve, replicas: int, seen: list[tuple[int, int]], deadline_s: float, pruner: str) -> bool:
    """Polls (API replicas, pruner replicas) into ``seen`` until the pruner runs ``replicas``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen.append((_running(serve, "squeez-api"), _running(serve, pruner)))
        if seen[-1][1] == replicas:
            return True
        time.sleep(0.5)
    return False


def test_pruner_deployment_scales_out_under_load_and_back_in_when_idle(ray_local):
    from ray import serve

    from squeez_ray.serve.app import build_app
    from squeez_ray.serve.local_pruning import PRUNER_DEPLOYMENT

    args = yaml.safe_load((REPO / "serve_configs/baseline.yaml").read_text())["applications"][0]["args"]
    shipped = args["pruner_deployment"]["autoscaling_config"]
    assert (shipped["min_replicas"], shipped["max_replicas"]) == (1, 2) and args["ingress_deployment"]["num_replicas"] == 1
    args["pruner_deployment"]["autoscaling_config"] = {**shipped, **FAST}
    port = _port()
    serve.shutdown()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name=APP, route_prefix="/")
    stop = threading.Event()
    body = {"query": "which test failed",
            "tool_output": "\n".join(f"tests/test_{i}.py::test_case PASSED in 0.{i % 10}s" for i in range(20000))}

    def load():
        while not stop.is_set():
            try:
                requests.post(f"http://127.0.0.1:{port}/v1/prune", json=body, timeout=60)
            except requests.RequestException:
                time.sleep(0.1)

    seen: list[tuple[int, int]] = []
    try:
        assert _wait_for(serve, 1, seen, 60, PRUNER_DEPLOYMENT), seen
        # More callers in flight than the shipped target_ongoing_requests per pruner replica, so its own
        # target asks for a second replica.
        clients = [threading.Thread(target=load, daemon=True) for _ in range(2 * shipped["target_ongoing_requests"])]
        for client in clients:
            client.start()
        assert _wait_for(serve, 2, seen, 120, PRUNER_DEPLOYMENT), f"no second pruner replica; (API, pruner) RUNNING: {seen}"
        stop.set()
        for client in clients:
            client.join(timeout=60)
        assert _wait_for(serve, 1, seen, 120, PRUNER_DEPLOYMENT), f"pruner did not scale back in; (API, pruner): {seen}"
        assert {api for api, _ in seen if api} == {1}, f"the API deployment is pinned at one replica: {seen}"
    finally:
        stop.set()
        serve.delete(APP)
        serve.shutdown()
