"""The warm pruner process (squeez_ray/cli/daemon.py) with real processes and real sockets: every way it
can fail (killed, stopped, busy, its socket removed or not the user's own, nonsense on the wire) must
give the same answer as pruning in the call's own process.

Each test has its own XDG_RUNTIME_DIR; the fixture kills every process it saw and removes the folder.
Where a test needs the process caught mid-request, it starts one whose baseline pruner sleeps first
(SLOW_DAEMON): the process, socket and protocol are the real ones, only the pruning takes longer.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from squeez_ray.cli import daemon_wire as wire

REPO = Path(__file__).resolve().parents[2]
LOG = ("".join(f"tests/test_mod.py::test_case_{i} PASSED\n" for i in range(300))
       + "tests/test_parser.py::test_header FAILED\nE   AssertionError: assert 7 == 8\n"
       + "==== 1 failed, 300 passed in 2.10s ====\n").encode()
QUERY = "which test failed and why"
BM25 = ["--backend", "bm25"]
SLOW_DAEMON = """
import os, sys, time
from squeez_ray.infer import baselines
slow = baselines.LineSelectionBaseline._prune_batch
def _prune_batch(self, *args, **kwargs):
    time.sleep(float(os.environ["SLOW_S"]))
    return slow(self, *args, **kwargs)
baselines.LineSelectionBaseline._prune_batch = _prune_batch
from squeez_ray.cli.daemon import main
sys.exit(main(["serve"]))
"""


class Box:
    """One user's world: runtime folder, store, environment; and the daemons seen in it."""

    def __init__(self, root: Path):
        self.root = root
        # short, under /tmp: pytest's tmp_path under xdist (.../popen-gw1/test_<name>0/run/squeez/d-<key>.sock)
        # passes the 108-byte limit of a Unix socket path, and the daemon rightly refuses to start there
        self.run_dir = Path(tempfile.mkdtemp(prefix="sqd-", dir="/tmp"))
        self.run_dir.chmod(0o700)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
        self.env.update(HOME=str(root), XDG_RUNTIME_DIR=str(self.run_dir), XDG_CONFIG_HOME=str(root / "config"),
                        SQUEEZ_STORE=str(root / "store"), SQUEEZ_DAEMON="1", PYTHONPATH=str(REPO))
        self.pids: set[int] = set()
        self.children: list[subprocess.Popen] = []

    def squeez(self, *args: str, data: bytes = LOG, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "squeez_ray.cli", *args], input=data, capture_output=True,
                              env={**self.env, **env}, timeout=300)

    def prune(self, *args: str, **env: str) -> tuple[bytes, str]:
        """(stdout, how it was answered: the route --stats names)."""
        out = self.squeez("--stats", *args, QUERY, **env)
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        return out.stdout, route_of(out.stderr)

    def in_process(self, *args: str) -> bytes:
        out = self.squeez(*args, QUERY, SQUEEZ_DAEMON="0")
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        return out.stdout

    @property
    def socket(self) -> Path:
        return wire.runtime_dir(self.env) / f"d-{wire.code_key()}.sock"

    def status(self) -> dict | None:
        try:
            state = wire.request(self.socket, {"op": "status"}, timeout=10)
        except (OSError, wire.WireError):
            return None
        self.pids.add(state["pid"])
        return state

    def wait_for(self, condition, what: str, limit: float = 120.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.05)
        pytest.fail(f"waited {limit:g} s for {what}")

    def start_slow(self, seconds: float) -> dict:
        wire.private_dir(env=self.env)
        proc = subprocess.Popen([sys.executable, "-c", SLOW_DAEMON], env={**self.env, "SLOW_S": str(seconds)},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.children.append(proc)
        self.pids.add(proc.pid)
        return self.wait_for(self.status, "the slow daemon")

    def close(self) -> None:
        self.status()
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.children:
            with contextlib.suppress(Exception):
                proc.wait(10)
        shutil.rmtree(self.run_dir, ignore_errors=True)


@pytest.fixture
def box(tmp_path):
    b = Box(tmp_path)
    yield b
    b.close()


def route_of(stderr: bytes) -> str:
    """How the call was answered, as its --stats line says: "warm", or "in-process (why)"."""
    found = re.findall(r"pruning \d+ ms \((.*)\)$", stderr.decode(), re.M)
    return found[-1] if found else stderr.decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie (our own child, not yet reaped) is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    return True


def test_frames_round_trip_and_an_oversized_frame_is_refused():
    left, right = socket.socketpair()
    with left, right:
        wire.send(left, {"tool_output": "a\nb \udcff", "n": 1})
        assert wire.receive(right) == {"tool_output": "a\nb \udcff", "n": 1}
        left.sendall((wire.MAX_MESSAGE + 1).to_bytes(4, "big"))
        with pytest.raises(wire.WireError, match="over"):
            wire.receive(right)
        assert wire.same_user(left)


def test_start_status_stop_with_the_shipped_encoder(box):
    expected = box.in_process()
    started = box.squeez("daemon", "start", data=b"")
    assert started.returncode == 0, started.stderr.decode()
    assert box.status()["pruners"] == ["encoder"]  # preloaded before the socket appeared
    assert oct(box.socket.stat().st_mode & 0o777) == "0o600"
    assert box.prune() == (expected, "warm")
    # The warm call loads no model runtime of its own (what makes it cheap).
    code = ("import sys; from squeez_ray.cli import main; main(sys.argv[1:]); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'onnxruntime', 'tokenizers'}), "
            "file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, "--stats", QUERY], input=LOG, capture_output=True,
                         env=box.env, timeout=300)
    assert out.stdout == expected and route_of(out.stderr) == "warm"
    assert out.stderr.decode().strip().splitlines()[-1] == "[]"
    assert box.status()["served"] == 2
    # It keeps to what is left of the call's time budget (issue 36 item 5): a tiny one is cut, and marked.
    cut, route = box.prune("--budget", "0.001")
    assert route == "warm" and b"over its time budget" in cut.splitlines()[-1], cut[-300:]
    assert box.squeez("daemon", "stop", data=b"").returncode == 0
    assert box.status() is None and not box.socket.exists()
    assert box.squeez("daemon", "status", data=b"").returncode == 3


def test_the_first_call_starts_it_and_prunes_meanwhile_the_next_goes_warm(box):
    expected = box.in_process(*BM25)
    assert box.prune(*BM25) == (expected, "in-process (absent: started the warm process)")
    box.wait_for(box.status, "the daemon the first call started")
    assert box.prune(*BM25) == (expected, "warm")
    out = box.squeez("run", *BM25, QUERY, "--", "cat", str(box.root / "log"), data=b"")  # squeez run goes too
    assert out.returncode == 1  # cat's own exit code: no such file (a short output, passed through)
    (box.root / "log").write_bytes(LOG)
    out = box.squeez("run", *BM25, QUERY, "--", "cat", str(box.root / "log"), data=b"")
    assert out.returncode == 0 and b"test_header FAILED" in out.stdout
    assert box.status()["served"] == 2


def test_other_options_get_their_own_pruner(box):
    box.start_slow(0)
    for ratio in ("0.1", "0.4"):
        expected = box.in_process(*BM25, "--keep-ratio", ratio)
        assert box.prune(*BM25, "--keep-ratio", ratio) == (expected, "warm")
    assert box.status()["pruners"] == ["bm25", "bm25"]


def _call_in_background(box: Box, **env: str) -> subprocess.Popen:
    call = subprocess.Popen([sys.executable, "-m", "squeez_ray.cli", "--stats", *BM25, QUERY],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**box.env, **env})
    call.stdin.write(LOG)
    call.stdin.close()
    call.stdin = None  # communicate() reads its answer only
    return call


def _finish(call: subprocess.Popen) -> tuple[bytes, str]:
    out, err = call.communicate(timeout=120)
    assert call.returncode == 0, err.decode()
    return out, route_of(err)


def test_killed_mid_request_the_call_prunes_itself(box):
    expected = box.in_process(*BM25)
    pid = box.start_slow(60)["pid"]
    call = _call_in_background(box)
    box.wait_for(lambda: (box.status() or {}).get("busy"), "the request to arrive")
    os.kill(pid, signal.SIGKILL)
    assert _finish(call) == (expected, "in-process (died: WireError)")


def test_stalled_mid_request_the_call_stops_waiting_and_prunes_itself(box):
    expected = box.in_process(*BM25)
    pid = box.start_slow(60)["pid"]
    call = _call_in_background(box, SQUEEZ_DAEMON_WAIT_S="3")
    box.wait_for(lambda: (box.status() or {}).get("busy"), "the request to arrive")
    os.kill(pid, signal.SIGSTOP)
    assert _finish(call) == (expected, "in-process (late)")


def test_a_stopped_process_never_acknowledges_and_the_call_prunes_itself(box):
    expected = box.in_process(*BM25)
    os.kill(box.start_slow(0)["pid"], signal.SIGSTOP)
    assert box.prune(*BM25) == (expected, "in-process (stalled)")


def test_a_busy_process_sends_the_second_call_home_at_once(box):
    expected = box.in_process(*BM25)
    box.start_slow(60)
    first = _call_in_background(box)
    box.wait_for(lambda: (box.status() or {}).get("busy"), "the first request to arrive")
    assert box.prune(*BM25) == (expected, "in-process (busy)")
    first.kill()
    first.communicate()


def test_a_removed_socket_ends_the_old_process_and_the_call_prunes_itself(box):
    expected = box.in_process(*BM25)
    pid = box.start_slow(0)["pid"]
    box.socket.unlink()
    assert box.prune(*BM25) == (expected, "in-process (absent: started the warm process)")
    box.wait_for(lambda: not _alive(pid), "the old process to exit", limit=20)
    assert box.wait_for(box.status, "its successor")["pid"] != pid


@pytest.mark.parametrize("spoil", ["open folder", "symlinked socket", "plain file"])
def test_a_folder_or_socket_that_is_not_the_users_alone_is_not_used(box, spoil):
    expected = box.in_process(*BM25)
    state = box.start_slow(0)
    if spoil == "open folder":
        box.socket.parent.chmod(0o755)
    else:
        real = box.root / "elsewhere.sock"
        os.replace(box.socket, real)
        if spoil == "symlinked socket":
            box.socket.symlink_to(real)
        else:
            box.socket.write_text("not a socket")
    stdout, route = box.prune(*BM25)
    assert stdout == expected and route.startswith("in-process (refused: ")
    if spoil == "open folder":
        assert box.status()["served"] == 0
    else:
        box.wait_for(lambda: not _alive(state["pid"]), "the process whose socket was replaced to exit", limit=20)


def test_nonsense_on_the_socket_costs_nothing(box):
    expected = box.in_process(*BM25)
    path = box.socket if wire.private_dir(env=box.env)[0] else None
    assert path is not None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)

    def answer_garbage():
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                wire.receive(conn)
                conn.sendall(b"\x00\x00\x00\x05nope!")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    stdout, route = box.prune(*BM25)
    listener.close()
    assert (stdout, route) == (expected, "in-process (died: WireError)")


def test_squeez_daemon_0_starts_nothing(box):
    expected = box.in_process(*BM25)
    assert box.prune(*BM25, SQUEEZ_DAEMON="0") == (expected, "in-process")
    time.sleep(0.5)
    assert not box.run_dir.joinpath("squeez").exists() or not any(box.run_dir.joinpath("squeez").iterdir())
    assert json.loads(box.squeez("daemon", "status", "--json", data=b"").stdout) is None


def test_a_bug_in_the_client_never_costs_the_call_its_pruning(monkeypatch, tmp_path):
    from squeez_ray.cli import daemon_client, settings as settings_mod
    from squeez_ray.cli.pruning import call_backend

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(wire, "socket_path", broken)
    settings = settings_mod.resolve({"backend": "bm25", "daemon": True}, env={"HOME": str(tmp_path)})
    result, failure, _, _ = call_backend(settings, QUERY, LOG.decode())
    assert failure is None and result.pruned and result.kept_lines == 30
    assert daemon_client.route == "in-process (client error: RuntimeError: boom)"


def test_it_exits_after_its_idle_time_and_takes_its_socket_along(box):
    started = box.squeez("daemon", "start", data=b"", SQUEEZ_BACKEND="bm25", SQUEEZ_DAEMON_IDLE_S="1")
    assert started.returncode == 0, started.stderr.decode()
    pid = box.status()["pid"]
    box.wait_for(lambda: not _alive(pid), "the idle process to exit", limit=30)
    assert not box.socket.exists()
    assert box.squeez("daemon", "status", data=b"").returncode == 3


def test_inside_a_test_run_only_an_explicit_squeez_daemon_turns_it_on(box):
    env = {k: v for k, v in box.env.items() if k != "SQUEEZ_DAEMON"}
    env["PYTEST_CURRENT_TEST"] = "some_test.py::test_x (call)"
    out = subprocess.run([sys.executable, "-m", "squeez_ray.cli", "--stats", *BM25, QUERY], input=LOG,
                         capture_output=True, env=env, timeout=300)
    assert out.returncode == 0 and route_of(out.stderr) == "in-process"
    assert not box.socket.exists()
