"""Clean up after embedded Rays whose job was killed.

When a job that started an embedded Ray (``init_ray`` with no cluster) is SIGKILLed, the driver's
children die with it (Ray shares their fate), but the raylet's own children, the per-node
DashboardAgent and RuntimeEnvAgent, are orphaned: they keep their ports and the dead session's
files, and the next job's Ray meets ports in use. So each embedded Ray is recorded here (driver
pid, its start time, the session directory), and the next ``init_ray`` removes the processes of
recorded sessions whose driver is gone. Only sessions this project started are touched, and only
processes of the same user with a file of that session open.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def records_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"squeez-ray-sessions-{os.getuid()}"


def record_session(session_dir: str) -> None:
    """Remember the embedded Ray this process just started."""
    import psutil

    me = psutil.Process()
    folder = records_dir()
    folder.mkdir(parents=True, exist_ok=True)
    record = {"pid": me.pid, "create_time": me.create_time(), "session_dir": str(session_dir)}
    (folder / f"{me.pid}.json").write_text(json.dumps(record), encoding="utf-8")


def reap_stale_sessions(grace_s: float = 3.0) -> list[int]:
    """Stop the leftover processes of recorded sessions whose driver is gone; return their pids."""
    folder = records_dir()
    if not folder.is_dir():
        return []
    reaped: list[int] = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            pid, started, session = int(record["pid"]), float(record["create_time"]), str(record["session_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _alive(pid, started):
            continue
        leftovers = _processes_holding(session)
        stop_processes(leftovers, grace_s)
        if leftovers:
            log.warning("stopped %d process(es) left by the killed job %d's Ray (%s)", len(leftovers), pid, session)
        reaped += [p.pid for p in leftovers]
        path.unlink(missing_ok=True)
    return reaped


def stop_processes(procs: list, grace_s: float) -> None:
    """SIGTERM each of ``procs`` (psutil processes), then SIGKILL those still there after ``grace_s``."""
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, still = psutil.wait_procs(procs, timeout=grace_s)
    for proc in still:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _alive(pid: int, started: float) -> bool:
    import psutil

    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0  # a reused pid is another process
    except psutil.Error:
        return False


def _processes_holding(session_dir: str) -> list:
    import psutil

    prefix = session_dir.rstrip("/") + "/"
    uid = os.getuid()
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.uids().real != uid:
                continue
            if any(f.path.startswith(prefix) for f in proc.open_files()):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found
