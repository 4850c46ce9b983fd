"""``squeez daemon start|stop|status``: one warm pruner process per user, so that a call does not pay for
starting the model runtime and loading the model.

The process holds the pruners it was asked for (keyed by the backend and every BackendOptions field
but the client's own timeout, so another ``--model`` or ``--threshold`` never gets the wrong one; two
at most, the least recently used is closed), answers on a Unix socket that only its user can open
(daemon_wire.py), prunes one output at a time (a request that finds it busy is told so at once and
prunes in its own process), and exits after ``daemon_idle_s`` without a request, or when its socket
file is removed or replaced.

A request: ``{"op": "prune", "protocol": 1, "query", "tool_output", "options": {"backend",
"backend_options", "tool_type", "line_numbers", "markers", "budget_s"}}`` (``budget_s``: what is left of
the call's time budget, counted from the request's arrival; null: none). Replies, in order: ``{"ack": true}``
(or ``{"busy": true}``) as soon as the request is read, then ``{"result": PruneResult fields}`` or
``{"error": "..."}``. ``{"op": "status"}`` and ``{"op": "stop"}`` are answered even while it prunes.
The clients are in daemon_client.py; every way this process can fail ends in the client pruning
in its own process.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from squeez_ray.cli import daemon_wire as wire

MAX_PRUNERS = 2
_TICK_S = 0.5  # how often the accept loop looks at the idle clock and its socket file
_LOCK_WAIT_S = 5.0  # a predecessor that is exiting (its socket was removed) frees the lock within a tick


class WarmProcess:
    def __init__(self, path: Path, idle_s: float):
        self.path = path
        self.idle_s = idle_s
        self.pruners: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.busy = threading.Lock()
        self.stopping = threading.Event()
        self.started = time.time()
        self.last_used = time.monotonic()
        self.served = 0
        self.failed = 0
        self.last_ms = 0.0
        self._inode: int | None = None

    # -- the loop ---------------------------------------------------------------------------------

    def serve(self, preload: dict[str, Any] | None = None) -> int:
        lock = _take_lock(self.path.with_suffix(".lock"))
        if lock is None:
            _log("another warm process holds the lock: exiting")
            return 0
        if preload:  # load the model before the socket appears: a socket that answers has it loaded
            try:
                self._pruner(preload)
            except Exception as error:  # noqa: BLE001 - clients prune in their own process meanwhile
                _log(f"cannot load the pruner ({type(error).__name__}: {error}): exiting")
                os.close(lock)
                return 1
        listener = self._listen()
        _log(f"listening on {self.path} (pid {os.getpid()}, idle exit after {self.idle_s:g} s)")
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    if self._should_exit():
                        break
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            self._unlink_own_socket()
            listener.close()
            with self.busy:  # a prune in flight finishes (its client may still be waiting)
                for pruner in self.pruners.values():
                    with contextlib.suppress(Exception):
                        pruner.close()
            os.close(lock)
        _log("exiting")
        return 0

    def _listen(self) -> socket.socket:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        staging = self.path.with_name(f".s{os.getpid()}")  # no longer than the socket's own name (path limit)
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
        old_umask = os.umask(0o177)  # the socket file is born 0600
        try:
            listener.bind(os.fspath(staging))
        finally:
            os.umask(old_umask)
        listener.listen(16)
        os.replace(staging, self.path)  # atomic: a client sees the old socket or this one, never none
        self._inode = os.lstat(self.path).st_ino
        listener.settimeout(_TICK_S)
        return listener

    def _should_exit(self) -> bool:
        try:
            if os.lstat(self.path).st_ino != self._inode:
                _log("socket file replaced: exiting")
                return True
        except FileNotFoundError:
            _log("socket file removed: exiting")
            return True
        idle = time.monotonic() - self.last_used
        return idle > self.idle_s and not self.busy.locked()

    def _unlink_own_socket(self) -> None:
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                self.path.unlink()

    # -- one connection ---------------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                if not wire.same_user(conn):
                    return
                conn.settimeout(30.0)
                message = wire.receive(conn)
                op = message.get("op")
                if op == "status":
                    wire.send(conn, self.status())
                elif op == "stop":
                    wire.send(conn, {"stopping": True, "pid": os.getpid()})
                    self.stopping.set()
                elif op == "prune":
                    self._prune_request(conn, message)
                else:
                    wire.send(conn, {"error": f"unknown op {op!r}"})
            except (wire.WireError, OSError) as error:  # the client went away or spoke nonsense: its loss only
                _log(f"connection dropped ({type(error).__name__}: {error})")

    def _prune_request(self, conn: socket.socket, message: dict[str, Any]) -> None:
        if message.get("protocol") != wire.PROTOCOL:
            wire.send(conn, {"error": f"protocol {message.get('protocol')!r}, this process speaks {wire.PROTOCOL}"})
            return
        if not self.busy.acquire(blocking=False):
            wire.send(conn, {"busy": True})
            return
        started = time.perf_counter()
        try:
            self.last_used = time.monotonic()
            wire.send(conn, {"ack": True})
            try:
                reply = {"result": self._prune(message).to_dict()}
            except Exception as error:  # noqa: BLE001 - the client prunes in its own process and says why
                self.failed += 1
                reply = {"error": f"{type(error).__name__}: {error}"}
                _log(f"prune failed: {reply['error']}")
            self.served += 1
            self.last_ms = (time.perf_counter() - started) * 1000
            wire.send(conn, reply)
        finally:
            self.last_used = time.monotonic()
            self.busy.release()

    def _prune(self, message: dict[str, Any]) -> Any:
        from squeez_ray.infer.base import PruneRequest, RenderOptions
        from squeez_ray.infer.budget import time_budget

        options = message["options"]
        budget_s = options.get("budget_s")
        if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))):
            raise ValueError(f"budget_s must be a number of seconds or null, not {budget_s!r}")
        with time_budget(budget_s):
            pruner = self._pruner(options)
            render = RenderOptions(line_numbers=bool(options.get("line_numbers")), markers=bool(options.get("markers")))
            request = PruneRequest(str(message["query"]), str(message["tool_output"]), options.get("tool_type"))
            return pruner.prune_batch([request], render_options=render, fail_open=False)[0]

    def _pruner(self, options: dict[str, Any]) -> Any:
        from squeez_ray.cli.daemon_client import served_backend
        from squeez_ray.infer.registry import BackendOptions, build_pruner

        backend, values = options["backend"], options["backend_options"]
        if not served_backend(backend):
            raise ValueError(f"backend {backend!r} is not served by the warm process")
        key = json.dumps([backend, {k: v for k, v in values.items() if k != "timeout_s"}], sort_keys=True)
        if key in self.pruners:
            self.pruners.move_to_end(key)
            return self.pruners[key]
        pruner = build_pruner(backend, BackendOptions(**values))
        self.pruners[key] = pruner
        while len(self.pruners) > MAX_PRUNERS:
            _, old = self.pruners.popitem(last=False)
            with contextlib.suppress(Exception):
                old.close()
        return pruner

    def status(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "socket": str(self.path), "uptime_s": round(time.time() - self.started, 1),
                "idle_s": round(time.monotonic() - self.last_used, 1), "idle_exit_s": self.idle_s,
                "busy": self.busy.locked(), "served": self.served, "failed": self.failed,
                "last_ms": round(self.last_ms, 1), "pruners": [json.loads(k)[0] for k in list(self.pruners)]}


def _take_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.1)


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} squeez daemon {os.getpid()}: {message}", file=sys.stderr, flush=True)


# -- the command ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from squeez_ray.cli.args import add_config_flag

    parser = argparse.ArgumentParser(
        prog="squeez daemon", description="The warm pruner process that squeez, squeez run, the hooks and "
        "squeez mcp use (started on first use unless SQUEEZ_DAEMON=0; exits after daemon_idle_s idle).")
    parser.add_argument("action", choices=("start", "stop", "status", "serve"),
                        help="serve: run in the foreground (what start spawns)")
    add_config_flag(parser)
    parser.add_argument("--idle", type=float, help="seconds without a request before it exits "
                                                   "(default: daemon_idle_s, 600)")
    parser.add_argument("--json", action="store_true", help="status: print the JSON the process answers")
    parser.add_argument("--preload", help=argparse.SUPPRESS)  # serve: request options to load before listening
    return parser


def main(argv: list[str]) -> int:
    from squeez_ray.cli import daemon_client as client
    from squeez_ray.cli.pipe import note

    args = build_parser().parse_args(argv)
    path, why = wire.socket_path(create=args.action in ("start", "serve"))
    if path is None and args.action in ("status", "stop") and not wire.runtime_dir().exists():
        print("null" if args.json else "squeez daemon: not running")
        return 3 if args.action == "status" else 0
    if path is None:
        note(f"daemon: cannot use the runtime folder: {why}")
        return 1
    if args.action == "serve":
        process = WarmProcess(path, args.idle if args.idle is not None else 600.0)
        signal.signal(signal.SIGTERM, lambda *_: process.stopping.set())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closing terminal is not a reason to go
        return process.serve(json.loads(args.preload) if args.preload else None)
    if args.action == "status":
        state = _status(path)
        if state is None:
            print("squeez daemon: not running" if not args.json else "null")
            return 3
        print(json.dumps(state) if args.json else
              f"squeez daemon: running, pid {state['pid']}, {state['served']} served, idle {state['idle_s']:g} s "
              f"of {state['idle_exit_s']:g}, pruners {', '.join(state['pruners']) or 'none'}, socket {path}")
        return 0
    if args.action == "stop":
        state = _status(path)
        if state is None:
            print("squeez daemon: not running")
            return 0
        with contextlib.suppress(OSError, wire.WireError):
            wire.request(path, {"op": "stop"})
        deadline = time.monotonic() + 10
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"squeez daemon: stopped (pid {state['pid']})")
        return 0
    settings, problem = client.command_settings(args.config, args.idle)
    if problem:
        note(f"daemon: {problem}")
        return 2
    state = _status(path)
    if state is None:
        client.spawn(settings, path, force=True)
        deadline = time.monotonic() + max(settings.timeout_s, 30.0)
        while state is None and time.monotonic() < deadline:
            time.sleep(0.1)
            state = _status(path)
    if state is None:
        note(f"daemon: did not come up; see {client.log_path(path)}")
        return 1
    print(f"squeez daemon: running, pid {state['pid']}, socket {path}")
    return 0


def _status(path: Path) -> dict[str, Any] | None:
    try:
        return wire.request(path, {"op": "status"})
    except (OSError, wire.WireError):
        return None
