"""Run one real tool process safely: argv only, scrubbed env, no network, a deadline, an output cap.

What the sandbox guarantees for each run:

* **No shell interpolation.** Commands are argv lists; repository and issue text only ever appear as
  single argv elements (callers also validate paths with :func:`safe_relpath`).
* **No network.** The process runs in a fresh network namespace (``unshare --net``; as non-root
  with ``--map-root-user``). Where neither works (a locked-down container), only the proxy
  variables point at a closed port, and :func:`network_isolation` says so (``"proxy-only"``), so a
  job can refuse to run.
* **Everything it starts dies with it.** A new session/process group, and, with unshare, a new PID
  namespace whose init is killed when we kill the wrapper: on timeout, on output overflow, and after
  a normal exit (stray background children are reaped).
* **Bounded memory and time.** Output is read incrementally in chunks; past ``max_output_bytes``
  the rest is not read, the process group is killed and ``truncated`` is set. Files it writes are
  capped at ``max_file_bytes`` (``prlimit --fsize``).
* **Scrubbed environment.** Only a minimal PATH (this interpreter's bin first, so ``python`` is the
  project venv), HOME/TMPDIR in a private temp dir, a UTF-8 locale and a few "do not write caches /
  do not prompt" switches; nothing is inherited, so no tokens or credentials leak into tools.

It does not isolate the filesystem (no chroot/container): a hostile repository's tests can still read
and write files the worker user can. Run collection workers in containers for untrusted code.
"""

from __future__ import annotations

import functools
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Unroutable on purpose: anything that honours proxy variables fails fast instead of leaking out,
# even where namespaces are unavailable.
_DEAD_PROXY = "http://127.0.0.1:9"
_READ_CHUNK = 64 * 1024


class UnsafePathError(ValueError):
    """A path from repository or issue text that would leave the working directory."""


@dataclass
class RunResult:
    argv: list[str]
    exit_code: int | None  # negative: killed by that signal (timeout, output cap); None: never started
    output: str  # stdout and stderr interleaved, as a terminal would show them
    truncated: bool
    duration_s: float
    error: str | None  # why the run is not a normal tool run (timeout, could not start), else None


def safe_relpath(root: str | Path, path: str) -> str:
    """``path`` normalised relative to ``root``, or UnsafePathError if it is absolute, climbs out with
    ``..``, looks like an option, holds control characters, or resolves (through symlinks) outside."""
    if not isinstance(path, str) or not path.strip():
        raise UnsafePathError(f"empty path {path!r}")
    if any(ord(c) < 32 for c in path) or "\\" in path:
        raise UnsafePathError(f"path {path!r} holds control characters or backslashes")
    if path.startswith("-"):
        raise UnsafePathError(f"path {path!r} starts with '-' and would be read as an option")
    if os.path.isabs(path) or path.startswith("~"):
        raise UnsafePathError(f"path {path!r} is absolute; only paths inside the working directory are allowed")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePathError(f"path {path!r} climbs out with '..'")
    rel = "/".join(parts) or "."
    root_real = os.path.realpath(root)
    # realpath follows every symlink on the way, so a link pointing outside is caught here.
    resolved = os.path.realpath(os.path.join(root_real, rel))
    if resolved != root_real and not resolved.startswith(root_real + os.sep):
        raise UnsafePathError(f"path {path!r} resolves outside the working directory (symlink?)")
    return rel


@functools.lru_cache(maxsize=1)
def network_isolation() -> str:
    """The strongest no-network wrapper that works here: "unshare", "unshare-userns" or "proxy-only"."""
    if shutil.which("unshare") is None:
        return "proxy-only"
    for mode in ("unshare", "unshare-userns"):
        try:
            probe = subprocess.run([*_unshare_prefix(mode), "true"], capture_output=True, timeout=10,
                                   env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return mode
    return "proxy-only"


def _unshare_prefix(mode: str) -> list[str]:
    # --pid --fork --kill-child: the tool is init of its own PID namespace and dies with the wrapper,
    # which takes every process it spawned (even ones that setsid() away from our process group).
    base = ["unshare", "--net", "--pid", "--fork", "--kill-child"]
    if mode == "unshare-userns":
        base.insert(1, "--map-root-user")
    # PID 1 ignores signals it has no handler for, so the tool must not be PID 1 (a test that
    # signals itself would hang): a shell sits there instead and reports the tool's status.
    return [*base, "--", "/bin/sh", "-c", '"$@"; exit $?', "sh"]


def scrubbed_env(home: str | Path, extra: dict[str, str] | None = None, dead_proxy: bool = True) -> dict[str, str]:
    """A fresh environment: nothing inherited from the worker (no tokens, no proxies, no config)."""
    bin_dir = os.path.dirname(sys.executable)
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "PYTHONDONTWRITEBYTECODE": "1",  # keep the cached worktree clean between instances
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }
    for name in () if not dead_proxy else ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY",
                 "ALL_PROXY"):
        env[name] = _DEAD_PROXY
    env.update(extra or {})
    return env


def run_sandboxed(argv: list[str], cwd: str | Path, *, timeout_s: float, max_output_bytes: int,
                  env_extra: dict[str, str] | None = None, home: str | Path | None = None,
                  max_file_bytes: int = 256 * 1024 * 1024, isolate_network: bool = True) -> RunResult:
    """Run ``argv`` in ``cwd`` under the guarantees in the module docstring; never raises for tool failures."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"argv must be a non-empty list of strings, got {argv!r}")
    own_home = home is None
    home_dir = Path(tempfile.mkdtemp(prefix="squeez-home-")) if own_home else Path(home)
    prefix: list[str] = []
    mode = network_isolation() if isolate_network else "off"
    if mode.startswith("unshare"):
        prefix += _unshare_prefix(mode)
    if max_file_bytes and shutil.which("prlimit"):
        prefix += ["prlimit", f"--fsize={int(max_file_bytes)}", "--"]
    # Inside a network namespace the proxy trap is unnecessary and would make curl's error less real.
    env = scrubbed_env(home_dir, env_extra, dead_proxy=not mode.startswith("unshare"))
    started = time.monotonic()
    if shutil.which(argv[0], path=env["PATH"]) is None:
        if own_home:
            shutil.rmtree(home_dir, ignore_errors=True)
        return RunResult(list(argv), None, "", False, 0.0, f"could not start: {argv[0]} not found on PATH {env['PATH']}")
    try:
        proc = subprocess.Popen([*prefix, *argv], cwd=str(cwd), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    except OSError as error:
        if own_home:
            shutil.rmtree(home_dir, ignore_errors=True)
        return RunResult(list(argv), None, "", False, time.monotonic() - started, f"could not start: {error}")
    deadline = started + timeout_s
    try:
        output, truncated, timed_out = _read_capped(proc, deadline, max_output_bytes)
        if not truncated and not timed_out:
            try:  # EOF can come before exit (a tool that closes stdout and keeps working)
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _kill_group(proc)
        proc.wait()
        if own_home:
            shutil.rmtree(home_dir, ignore_errors=True)
    duration = time.monotonic() - started
    error = f"timeout: killed after {timeout_s:g}s" if timed_out else None
    return RunResult(list(argv), proc.returncode, output.decode("utf-8", errors="replace"), truncated, duration, error)


def _read_capped(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytes, bool, bool]:
    """Read the merged output until EOF, the deadline, or ``cap`` bytes; returns (bytes, truncated, timed_out)."""
    buf = bytearray()
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(buf), False, True
            if not sel.select(timeout=min(left, 1.0)):
                continue
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if not chunk:  # EOF: every writer closed the pipe
                return bytes(buf), False, False
            room = cap - len(buf)
            if len(chunk) > room:
                # Keep exactly ``cap`` bytes and stop reading: the caller kills the group, so a tool
                # that would print a gigabyte costs one chunk of memory and no more time.
                buf += chunk[:room]
                return bytes(buf), True, False
            buf += chunk


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.stdout:
        proc.stdout.close()
