"""The client side of the warm pruner process (daemon.py): ``warm_prune`` asks it, and on any trouble
says "prune here" (None), so that the caller's own fail-open rules apply as they always did.

Every front end goes through ``pruning.call_backend``, which asks here first: ``squeez``, ``squeez
run`` (so the hooks' wrapped commands), ``squeez mcp`` and ``squeez report``. The process is used for
the backends that load a local model or index library on the CPU (the shipped encoder, the
baselines); it is started, detached, on the first call that finds none, and that call prunes in its
own process (``START_WAIT_S``: waiting for it measured no faster, see docs/CLI.md "Performance").

When the call prunes in its own process instead (``route`` says why):

- off: ``daemon: false`` / ``SQUEEZ_DAEMON=0``, a backend it does not serve, or a pytest run that did
  not set ``SQUEEZ_DAEMON``;
- absent: no socket (the process is started, at most once per ``_SPAWN_EVERY_S``);
- refused: the folder or socket is not this user's alone, or the peer runs as another user;
- busy: it is pruning another output (it says so at once);
- stalled: no acknowledgement within ``ACK_S`` (stopped, swapped out);
- late: no answer within ``daemon_wait_s`` (default: half of ``timeout_s``, so the call still
  has the other half to prune here);
- died / error / bad reply: the connection broke, its backend failed, or the reply does not fit the output.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from squeez_ray.cli import daemon_wire as wire

if TYPE_CHECKING:
    from squeez_ray.cli.settings import Settings

ACK_S = 2.0
START_WAIT_S = 0.0
_SPAWN_EVERY_S = 30.0
_OFF = ("0", "false", "no", "off")

route = "in-process"  # how the last call in this process was answered (for --stats and the tests)


def served_backend(backend: str | None) -> bool:
    from squeez_ray.infer.registry import BASELINES, SHIPPED_MODEL_BACKENDS

    return backend in SHIPPED_MODEL_BACKENDS or backend in BASELINES


def enabled(settings: Settings) -> bool:
    if not hasattr(socket, "AF_UNIX") or not hasattr(os, "getuid"):  # no Unix sockets / uids (Windows)
        return False
    # Inside a pytest run, only where a test asks for it: the suite's many `squeez` subprocesses (often with
    # SQUEEZ_* and XDG_* scrubbed from their environment) must not leave warm processes behind.
    if "PYTEST_CURRENT_TEST" in os.environ and "SQUEEZ_DAEMON" not in os.environ:
        return False
    return str(getattr(settings, "daemon", True)).strip().lower() not in _OFF and served_backend(settings.backend)


def request_options(settings: Settings) -> dict[str, Any]:
    """What the warm process needs to build the same pruner: paths made absolute (its cwd is not ours)."""
    from squeez_ray.cli import settings as settings_mod

    values = asdict(settings_mod.backend_options(settings))
    model = values.get("model")
    if model and "://" not in model and os.path.exists(os.path.expanduser(model)):
        values["model"] = os.path.abspath(os.path.expanduser(model))
    values["api_key"] = None  # the served backends need none; and it would show on a command line (spawn)
    return {"backend": settings.backend, "backend_options": values, "tool_type": settings.tool_type,
            "line_numbers": bool(settings.line_numbers), "markers": bool(settings.markers)}


def wait_s(settings: Settings) -> float:
    given = getattr(settings, "daemon_wait_s", None)
    return float(given) if given else settings.timeout_s / 2


def warm_prune(settings: Settings, query: str, text: str, budget_s: float | None = None) -> Any:
    """The warm process's PruneResult for this output, or None: prune in this process. ``budget_s``: the
    seconds left of the call's time budget (squeez_ray.infer.budget), which the warm process keeps to."""
    global route
    route = "in-process"
    if not enabled(settings):
        return None
    try:
        return _ask(settings, query, text, budget_s)
    except Exception as error:  # noqa: BLE001 - a bug here must never cost the call its pruning
        route = f"in-process (client error: {type(error).__name__}: {error})"
        return None


def _ask(settings: Settings, query: str, text: str, budget_s: float | None = None) -> Any:
    global route
    path, why = wire.socket_path()
    if path is None:
        route = f"in-process (refused: {why})"
        return None
    deadline = time.monotonic() + wait_s(settings)
    ack_s = min(ACK_S, wait_s(settings) / 2)
    try:
        sock = _connect_or_start(settings, path, ack_s)
    except PermissionError as error:
        route = f"in-process (refused: {error})"
        return None
    except TimeoutError:  # its listen queue is full and it does not accept: stopped, or swamped
        route = "in-process (stalled)"
        return None
    except OSError as error:
        route = f"in-process (cannot connect: {error.strerror or error})"
        return None
    if sock is None:
        route = "in-process (absent: started the warm process)"
        return None
    acked = False
    with sock:
        try:
            sock.settimeout(max(ack_s, 1.0 + len(text) / 20e6))  # a big output takes a moment to send
            wire.send(sock, {"op": "prune", "protocol": wire.PROTOCOL, "query": query, "tool_output": text,
                             "options": request_options(settings) | {"budget_s": budget_s}})
            sock.settimeout(ack_s)
            first = wire.receive(sock)
            if not first.get("ack"):
                route = "in-process (busy)" if first.get("busy") else f"in-process (error: {first.get('error')})"
                return None
            acked = True
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            reply = wire.receive(sock)
        except TimeoutError:
            route = "in-process (late)" if acked else "in-process (stalled)"
            return None
        except (OSError, wire.WireError) as error:
            route = f"in-process (died: {type(error).__name__})"
            return None
    result = _result(reply, text)
    route = "warm" if result is not None else f"in-process (error: {reply.get('error') or 'bad reply'})"
    return result


def _connect_or_start(settings: Settings, path: Path, timeout: float) -> socket.socket | None:
    try:
        return wire.connect(path, timeout)
    except (FileNotFoundError, ConnectionRefusedError):
        spawn(settings, path)
    if START_WAIT_S <= 0:
        return None
    until = time.monotonic() + START_WAIT_S
    while time.monotonic() < until:
        time.sleep(0.05)
        try:
            return wire.connect(path, timeout)
        except (FileNotFoundError, ConnectionRefusedError):
            continue
    return None


def _result(reply: dict[str, Any], text: str) -> Any:
    from squeez_ray.infer.base import PruneResult
    from squeez_ray.spans import split_lines

    found = reply.get("result")
    if not isinstance(found, dict):
        return None
    names = {f.name for f in fields(PruneResult)}
    try:
        result = PruneResult(**{k: v for k, v in found.items() if k in names})
    except TypeError:  # a field missing
        return None
    spans_ok = isinstance(result.spans, list) and all(
        isinstance(s, list) and len(s) == 2 and all(isinstance(n, int) for n in s) for s in result.spans)
    if not spans_ok or not isinstance(result.text, str) or result.total_lines != len(split_lines(text)):
        return None  # an answer about another text (or another version's shape): never cut by it
    return result


def log_path(path: Path) -> Path:
    return path.with_suffix(".log")


def spawn(settings: Settings, path: Path, force: bool = False) -> None:
    """Start the warm process, detached (own session, no inherited pipes); never waits for it. At most
    once per _SPAWN_EVERY_S unless ``force``: a process that cannot start is not retried on every call."""
    import json

    stamp = path.with_suffix(".spawned")
    try:
        if not force and time.time() - os.stat(stamp).st_mtime < _SPAWN_EVERY_S:
            return
    except FileNotFoundError:
        pass
    try:
        stamp.touch(mode=0o600)
        os.utime(stamp)
        options = request_options(settings)
        with open(log_path(path), "ab") as log:
            os.chmod(log_path(path), 0o600)
            subprocess.Popen(
                [sys.executable, "-m", "squeez_ray.cli", "daemon", "serve", "--idle", f"{settings.daemon_idle_s:g}",
                 "--preload", json.dumps(options)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                close_fds=True)
    except OSError:  # cannot write the folder, cannot exec: this call prunes here as it would anyway
        return


def command_settings(config_path: str | None, idle_s: float | None) -> tuple[Any, str | None]:
    """The resolved settings ``squeez daemon start`` preloads, or a one-line problem."""
    from squeez_ray.cli import settings as settings_mod
    from squeez_ray.config import ConfigError

    try:
        settings = settings_mod.resolve({"daemon_idle_s": idle_s}, config_path=config_path)
    except ConfigError as error:
        return None, str(error)
    problem = settings_mod.missing_model_message(settings)
    if problem:
        return None, problem.split("\n", 1)[0]
    if not served_backend(settings.backend):
        return None, f"backend {settings.backend} is not served by the warm process (it prunes in each call)"
    return settings, None
