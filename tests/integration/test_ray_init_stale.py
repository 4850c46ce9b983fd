"""A job SIGKILLed while its embedded Ray runs leaves Ray's per-node agents (DashboardAgent,
RuntimeEnvAgent) orphaned, holding ports and the dead session's files; the next job that starts
an embedded Ray through ``init_ray`` removes them and runs (issue #15, item 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
JOB = """
import sys, time
import ray
from squeez_ray.ray_init import init_ray
init_ray()
print("up", ray.get(ray.remote(lambda: 42).remote()), flush=True)
if sys.argv[1:] == ["hold"]:
    time.sleep(600)
"""


def _holding(session_marker: str) -> list[psutil.Process]:
    """Live processes with a file of the session open (Ray names the session after the driver's pid)."""
    out = []
    for proc in psutil.process_iter():
        try:
            if any(session_marker in f.path for f in proc.open_files()):
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def test_a_sigkilled_jobs_orphans_are_cleaned_by_the_next_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    log = tmp_path / "killed.log"
    with open(log, "wb") as out:
        job = subprocess.Popen([sys.executable, "-c", JOB, "hold"], stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 240
    while b"up 42" not in log.read_bytes():
        assert job.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    marker = f"_{job.pid}/"  # /tmp/ray/session_<date>_<driver pid>/...
    job.send_signal(signal.SIGKILL)
    job.wait()
    time.sleep(3)
    orphans = _holding(marker)
    assert orphans, "expected Ray agents of the killed job to outlive it (the situation this test covers)"
    rerun = subprocess.run([sys.executable, "-c", JOB], capture_output=True, env=env, timeout=300, check=False)
    assert rerun.returncode == 0 and b"up 42" in rerun.stdout, rerun.stderr[-3000:]
    assert _holding(marker) == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans)


# Started by Ray's raylet as a Python process: the dashboard agent sleeps past the raylet's fixed 15 s wait
# for its port file the first time (a marker file remembers it), as it did on a loaded 2-core CI machine.
SLOW_AGENT_ONCE = """
import os, sys, time
if any(arg.endswith("dashboard/agent.py") for arg in sys.argv) and not os.path.exists(os.environ["SLOW_AGENT_MARK"]):
    open(os.environ["SLOW_AGENT_MARK"], "w").close()
    time.sleep(25)
"""


def test_a_node_that_times_out_at_start_is_started_once_more(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_AGENT_ONCE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
           "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1", "SLOW_AGENT_MARK": str(tmp_path / "slowed")}
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run([sys.executable, "-c", JOB], capture_output=True, env=env, timeout=300, check=False)
    assert (tmp_path / "slowed").exists()  # the first agent really was slowed
    assert run.returncode == 0 and b"up 42" in run.stdout, run.stderr[-3000:]
    assert b"timed out during start-up" in run.stderr and b"starting it once more" in run.stderr
