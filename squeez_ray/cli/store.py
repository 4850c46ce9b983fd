"""The local store of full outputs, so that a pruned pipe never loses anything: ``squeez show ID``.

One file per output, named by the SHA-256 of its bytes (the id shown is a 12-character prefix, and
``show`` accepts any unique prefix, as git does). Content addressing makes concurrent squeez
processes safe without coordination for writes: two processes storing the same output write the
same bytes, each through a temporary file renamed into place (atomic), so a reader sees a whole
file or none. Eviction (oldest modification time first, beyond a total size) takes an advisory
lock so that two processes do not both evict for the same overflow; a file another process already
removed is simply skipped.

Outputs are kept in full before pruning, secrets included (an ``env`` dump, a token in a log), so
the store is private whatever the umask: its folder is 0700 and every entry 0600, written so from
the start (never readable by others, even for a moment). A store made by an older squeez (0755
folder, 0644 entries) is tightened on first use; a store folder owned by another user is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHORT_ID = 12
MIN_PREFIX = 4
SUFFIX = ".out"
# Temporary files of a crashed writer older than this are removed during eviction.
STALE_TMP_S = 3600
LOCK_WAIT_S = 2.0  # eviction waits this long at most for another process's lock, then skips
_ENTRY = re.compile(r"^[0-9a-f]{64}\.out$")  # what put() names an entry: the SHA-256 of its bytes
DIR_MODE, FILE_MODE = 0o700, 0o600  # owner-only: the store holds whole outputs, secrets included


def is_id_shaped(ident: str) -> bool:
    """Whether ``ident`` could name an entry: hex, at least MIN_PREFIX characters (a prefix of a SHA-256)."""
    ident = ident.strip().lower()
    return MIN_PREFIX <= len(ident) <= 64 and all(c in "0123456789abcdef" for c in ident)


class StoreError(Exception):
    """An id that is unknown or ambiguous, or a store that cannot be written."""


@dataclass(frozen=True)
class Stored:
    id: str  # short id to show the user
    path: Path
    note: str | None = None  # the output is kept, but eviction failed (the store may outgrow its bound)


class OutputStore:
    def __init__(self, root: str | Path, max_bytes: int):
        self.root = Path(root).expanduser()
        self.max_bytes = int(max_bytes)
        self._private = False  # the folder was made (or checked) owner-only by this object

    def put(self, data: bytes) -> Stored:
        """Keep ``data``; returns its id. Storing the same bytes again refreshes their age."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / (digest + SUFFIX)
        if len(data) > self.max_bytes:
            raise StoreError(f"output of {len(data)} bytes is larger than the whole store ({self.max_bytes} bytes)")
        try:
            self._make_private()
            _write_private(path, data)  # rewriting identical bytes also makes it the newest entry
        except OSError as error:
            raise StoreError(f"cannot write to the store {self.root}: {error}") from None
        # The output is safely stored now: an eviction failure (an entry it cannot delete, a `.lock`
        # that is not a file) must not cost the caller its answer, only a note.
        problems: list[str] = []
        try:
            self.evict(keep=path, problems=problems)
        except OSError as error:
            problems.append(f"the lock {self.root / '.lock'}: {error}")
        note = f"could not evict old outputs ({'; '.join(problems[:2])})" if problems else None
        return Stored(digest[:SHORT_ID], path, note)

    def get(self, ident: str) -> bytes:
        """The stored bytes, checked against the SHA-256 their name claims: never print an entry that
        was altered, or a link planted in the store, as if squeez had kept it."""
        path = self.resolve(ident)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            if path.is_symlink():
                raise StoreError(f"store entry {path.name} is a symbolic link, not an output squeez kept: "
                                 f"not printed") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if hashlib.sha256(data).hexdigest() != path.name[: -len(SUFFIX)]:
            raise StoreError(f"store entry {path.name} does not match its id (altered or corrupted since it was "
                             f"kept): not printed")
        return data

    def resolve(self, ident: str) -> Path:
        ident = ident.strip().lower()
        if not is_id_shaped(ident):
            raise StoreError(f"{ident!r} is not a store id (ids are hex, at least {MIN_PREFIX} characters)")
        matches = sorted(p for p in self.root.glob(ident + "*" + SUFFIX) if _ENTRY.match(p.name)) \
            if self.root.is_dir() else []
        if not matches:
            raise StoreError(f"no output with id {ident} in {self.root} (it may have been evicted: the store "
                             f"keeps the newest {self.max_bytes // (1 << 20)} MiB)")
        if len(matches) > 1:
            raise StoreError(f"id {ident} is ambiguous in {self.root}: give more characters")
        return matches[0]

    def entries(self) -> list[tuple[int, int, Path]]:
        """(mtime_ns, size, path) of every stored output, oldest first."""
        out = []
        for path in self.root.glob("*" + SUFFIX):
            if path.name.startswith("."):
                continue
            try:
                st = path.stat()
            except FileNotFoundError:  # evicted by another process meanwhile
                continue
            out.append((st.st_mtime_ns, st.st_size, path))
        out.sort()
        return out

    def evict(self, keep: Path | None = None, problems: list[str] | None = None) -> list[Path]:
        """Remove the oldest outputs until the total fits ``max_bytes``; never ``keep`` (the newest put).

        An entry that cannot be removed is skipped (and described in ``problems`` when given)."""
        removed = []
        with self._lock():
            self._remove_stale_tmp()
            entries = self.entries()
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.max_bytes:
                    break
                if path == keep:
                    continue
                try:
                    path.unlink()
                    removed.append(path)
                except FileNotFoundError:
                    pass
                except OSError as error:  # not ours to delete (permissions, a directory): skip it
                    if problems is not None:
                        problems.append(f"{path.name}: {error.strerror or error}")
                    continue
                total -= size
        return removed

    def _make_private(self) -> None:
        """Create the folder owner-only, or make an existing one so (with its entries) on first use."""
        if self._private:
            return
        self.root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        st = os.stat(self.root)
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise StoreError(f"the store {self.root} belongs to another user (uid {st.st_uid}): not used, "
                             f"as it would show them every output")
        if stat.S_IMODE(st.st_mode) != DIR_MODE:  # made by an older squeez, or by mkdir under the umask
            os.chmod(self.root, DIR_MODE)
            for entry in self.root.iterdir():
                with contextlib.suppress(OSError):  # gone meanwhile, or not ours: the folder now hides it
                    st_entry = entry.lstat()
                    if stat.S_ISREG(st_entry.st_mode) and stat.S_IMODE(st_entry.st_mode) & 0o077:
                        os.chmod(entry, FILE_MODE)
        self._private = True

    def _remove_stale_tmp(self) -> None:
        now = time.time()
        for path in self.root.glob(".*.tmp"):
            with contextlib.suppress(OSError):  # gone already, or not ours to delete
                if now - path.stat().st_mtime > STALE_TMP_S:
                    path.unlink()

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # no advisory locks (Windows): eviction may overshoot, never corrupts
            yield
            return
        self._make_private()
        # Never blocks: a FIFO planted as `.lock` would block a plain open until a writer came, and a
        # lock another process holds for long is waited for LOCK_WAIT_S at most (eviction then waits
        # for the next put): either way the caller's own --timeout still holds.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.root / ".lock", flags, FILE_MODE)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError("not a regular file")
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise OSError(f"held by another process for {LOCK_WAIT_S:g} s") from None
                    time.sleep(0.02)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _write_private(path: Path, data: bytes) -> None:
    """Atomically, and 0600 from the first byte: a temporary file beside ``path``, renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)  # mkstemp's 0600 is narrowed by the umask: say it exactly
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
