"""``squeez run``'s command: read its merged output until it ends, whatever it and squeez's caller do.

The promise is the pipe's: once output is read, no path ends with an empty stdout.

- SIGTERM and SIGHUP are passed on to the command. A command still running ``STOP_GRACE_S`` later
  (it ignores them) is killed, so a caller's TERM-then-KILL (``timeout -k``, an agent's tool
  timeout) finds squeez printing what was read instead of being killed with nothing printed. A
  command asked to stop is not pruned afterwards: its output is printed whole at once.
- SIGINT is left to the command (a terminal's Ctrl-C reaches it directly), as a shell leaves it to
  its foreground job.
- Reading stops ``AFTER_EXIT_S`` after the command exits even while a process it left in the
  background still holds the pipe open (``seq 300; sleep 1000 &``): what was read is printed.
- Past ``limit`` bytes the output is streamed to the answer as it arrives (memory stays flat).
- Once the output is read, a signal while squeez prunes it prints it whole, unpruned, and ends
  squeez with the command's exit code (``on_signal``); exactly one answer ever reaches stdout.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from typing import IO

from squeez_ray.cli import signals
from squeez_ray.cli.pipe import note

CHUNK = 1 << 16
STOP_GRACE_S = 1.0  # after a forwarded SIGTERM / SIGHUP, before the command is killed
AFTER_EXIT_S = 1.0  # after the command exits, reading what its leftover processes still write
_POLL_S = 0.05


def exit_status(returncode: int) -> int:
    """The shell's convention: a command ended by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class Child:
    """The running command (``proc``, set once started) and the one answer written to ``out``."""

    def __init__(self, out: IO[bytes], limit: int | None):
        self.out = out
        self.limit = limit
        self.proc: subprocess.Popen | None = None
        self.stop_by: str | None = None  # the signal that asked squeez to stop, while the command ran
        self._stop_at: float | None = None  # when the command is killed if it is still running
        self.data: bytes | None = None  # the whole output once read (None: streamed, or not read yet)
        self.code: int | None = None  # the command's exit status, once read
        self.streamed = False  # over ``limit``: the output was written to ``out`` as it came
        self._answer = threading.Lock()  # held by whoever writes the one answer
        self._answered = threading.Event()
        self._write_failed = False

    # -- the main thread ----------------------------------------------------------------------------

    def collect(self) -> None:
        """Read the command's output until end-of-file or (it exited) ``AFTER_EXIT_S``; then its status."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks: list[bytes] = []
        size = 0
        exited_at: float | None = None
        while True:
            now = self._enforce_stop()
            if exited_at is None and self.proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= AFTER_EXIT_S:
                note(f"the command exited, but a process it started still holds its output open: stopped "
                     f"reading {AFTER_EXIT_S:g} s after it exited")
                break
            ready, _, _ = select.select([fd], [], [], _POLL_S)
            if not ready:
                continue
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if self.streamed:
                self._stream(chunk)
                continue
            chunks.append(chunk)
            if self.limit is not None and size > self.limit:
                self.streamed = True
                self._stream(b"".join(chunks))
                chunks = []
        while self.proc.poll() is None:  # end-of-file, but the command still runs (it closed its stdout)
            self._enforce_stop()
            time.sleep(_POLL_S)
        with contextlib.suppress(OSError):
            self.proc.stdout.close()
        if not self.streamed:
            self.data = b"".join(chunks)
        self.code = exit_status(self.proc.returncode)  # last: the watcher reads ``data`` once this is set

    def write(self, data: bytes) -> None:
        """Write the answer, unless a signal's answer is being written (that one ends the process)."""
        if not self._answer.acquire(blocking=False):
            threading.Event().wait()
        try:
            self._write(data)
        finally:
            self._answered.set()

    # -- the signal watcher thread (signals.py) ------------------------------------------------------

    def on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.code is None:  # the command runs (or is not started yet), or squeez still reads it
            if self.proc is None:
                signals.end_process(128 + signum)
            if signum == signal.SIGINT:
                return
            with contextlib.suppress(OSError):
                self.proc.send_signal(signum)
            if self.stop_by is None:
                self.stop_by = name
                self._stop_at = time.monotonic() + STOP_GRACE_S
            return
        if self.data is None:  # streamed: everything read is written already; the main thread ends now
            return
        if self._answer.acquire(blocking=False):
            self._write(self.data)
            note(f"interrupted by {name}: the command's full output passed through unpruned")
            signals.end_process(self.code)
        self._answered.wait(2.0)  # the main thread is writing the answer: let it finish (bounded)
        signals.end_process(self.code)

    # -- helpers ------------------------------------------------------------------------------------

    def _enforce_stop(self) -> float:
        now = time.monotonic()
        if self._stop_at is not None and now >= self._stop_at and self.proc is not None and self.proc.poll() is None:
            self._stop_at = None
            note(f"the command was still running {STOP_GRACE_S:g} s after {self.stop_by}: killed it")
            with contextlib.suppress(OSError):
                self.proc.kill()
        return now

    def _stream(self, data: bytes) -> None:
        if not self._write_failed:
            self._write(data)

    def _write(self, data: bytes) -> None:
        """Write and flush; a closed reader or a full disk is said once, and the rest discarded."""
        try:
            self.out.write(data)
            self.out.flush()
        except BrokenPipeError:  # the reader went away (`| head`): not an error
            self._write_failed = True
        except (OSError, ValueError) as error:
            if not self._write_failed:
                note(f"cannot write the output: {getattr(error, 'strerror', None) or error}")
            self._write_failed = True
