"""What the warm pruner process (daemon.py) and its clients (daemon_client.py) share: where the
socket lives, who may use it, and the bytes on it.

Where: ``$XDG_RUNTIME_DIR/squeez/`` (the user's own, cleared at logout), else ``$TMPDIR/squeez-UID/``.
The folder must be a real folder (not a link), owned by this user, with no group or other
permission bits; a socket in it must be a socket owned by this user, and the process on its other
end must run as this user (SO_PEERCRED, where the platform has it). Anything else: the warm process
is not used and the call prunes in its own process.

One socket per installation and model code (``d-<key>.sock``): a second venv, or an edit to the
scoring code, gets its own process instead of answering with another version's pruner.

The bytes: each message is a 4-byte big-endian length, then that many bytes of UTF-8 JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

PROTOCOL = 1
MAX_MESSAGE = 64 << 20  # a request holds one output (max_input_mb is 16 MB by default)
_SUN_PATH_MAX = 100  # AF_UNIX paths are limited to ~104-108 bytes


class WireError(Exception):
    """The other end sent something that is not a message, or went away mid-message."""


def runtime_dir(env: Any = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return Path(base) / "squeez"
    return Path(tempfile.gettempdir()) / f"squeez-{os.getuid()}"


def private_dir(create: bool = True, env: Any = None) -> tuple[Path | None, str | None]:
    """(the folder, None), or (None, why it cannot hold the socket). Never loosens or takes over a folder."""
    path = runtime_dir(env)
    if create:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            return None, f"cannot create {path}: {error.strerror or error}"
    try:
        info = os.lstat(path)
    except OSError as error:
        return None, f"{path}: {error.strerror or error}"
    if not stat.S_ISDIR(info.st_mode):
        return None, f"{path} is not a folder"
    if info.st_uid != os.getuid():
        return None, f"{path} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o077:
        return None, f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}; it must be 700)"
    return path, None


def code_key() -> str:
    """Which installation and which model code: the package's folder, its version, and when its
    pruning code or shipped model last changed."""
    import squeez_ray

    root = Path(squeez_ray.__file__).parent
    parts = [str(root), getattr(squeez_ray, "__version__", "")]
    for folder in (root / "infer", root / "models" / "default"):
        try:
            with os.scandir(folder) as entries:
                parts.append(str(max((e.stat().st_mtime_ns for e in entries if e.is_file()), default=0)))
        except OSError:
            parts.append("-")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def socket_path(create: bool = True, env: Any = None) -> tuple[Path | None, str | None]:
    folder, why = private_dir(create, env)
    if folder is None:
        return None, why
    path = folder / f"d-{code_key()}.sock"
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        return None, f"socket path {path} is too long for a Unix socket"
    return path, None


def socket_problem(path: Path) -> str | None:
    """Why the file at ``path`` is not our daemon's socket (None: it may be); FileNotFoundError if absent."""
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket"
    if info.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {info.st_uid})"
    return None


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux SO_PEERCRED); None where the platform cannot say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid


def same_user(sock: socket.socket) -> bool:
    uid = peer_uid(sock)
    return uid is None or uid == os.getuid()


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message, ensure_ascii=False).encode("utf-8", errors="surrogatepass")
    sock.sendall(struct.pack(">I", len(body)) + body)


def receive(sock: socket.socket) -> dict[str, Any]:
    """One message; raises WireError on a short read or a bad frame, socket.timeout past the socket's timeout."""
    (size,) = struct.unpack(">I", _exactly(sock, 4))
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes is over the {MAX_MESSAGE} limit")
    try:
        message = json.loads(_exactly(sock, size).decode("utf-8", errors="surrogatepass"))
    except ValueError as error:
        raise WireError(f"not JSON: {error}") from None
    if not isinstance(message, dict):
        raise WireError("not a JSON object")
    return message


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise WireError("the other end closed the connection mid-message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def connect(path: Path, timeout: float) -> socket.socket:
    """A connection to our daemon at ``path``. Raises FileNotFoundError / ConnectionRefusedError when none
    listens there, PermissionError when the socket or its peer is not ours."""
    problem = socket_problem(path)
    if problem:
        raise PermissionError(problem)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(os.fspath(path))
        if not same_user(sock):
            raise PermissionError(f"the process behind {path} runs as another user")
    except BaseException:
        sock.close()
        raise
    return sock


def request(path: Path, message: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """One message and its one reply (status, stop)."""
    with connect(path, timeout) as sock:
        send(sock, message)
        return receive(sock)
