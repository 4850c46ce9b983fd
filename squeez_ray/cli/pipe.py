"""The command's answer stream: stdout holds only the answer, whatever engines print meanwhile.

Shared by ``squeez`` (prune) and ``squeez show``: the exit codes, the stderr note, and the
reservation of the real stdout while a backend runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import threading
from collections.abc import Iterator
from typing import IO

EXIT_OK, EXIT_BACKEND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def note(message: str) -> None:
    print(f"squeez: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def reserved_stdout() -> Iterator[tuple[IO[bytes], bool]]:
    """Keep the real stdout for the answer; send fd 1 (and ``print``) to stderr meanwhile.

    Engines log to stdout (vLLM does by default) and their worker processes inherit fd 1: without
    this, log lines would land in the agent's pruned output. Yields the answer stream and whether
    it is ours to close early.
    """
    if _stdout_closed():  # `cmd | squeez q >&-`: the answer has nowhere to go; the work (a command) still runs
        note("stdout is closed: the answer is discarded")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):  # no real fd 1 / 2 (closed, or an embedding)
        yield sys.stdout.buffer, False
        return
    python_stdout = sys.stdout
    sys.stdout = sys.stderr
    answer = os.fdopen(saved, "wb")
    try:
        yield answer, True
    finally:
        sys.stdout = python_stdout
        if not answer.closed:  # once released early (see release) the real stdout is gone for good
            with contextlib.suppress(OSError):
                answer.flush()
            os.dup2(saved, 1)
            release(answer)


def _stdout_closed() -> bool:
    """Whether fd 1 was closed; if so, /dev/null takes its place, so that no file squeez opens (a pipe,
    the store) lands on fd 1 and receives the answer, and the answer's writes fail no one."""
    try:
        os.fstat(1)
        return False
    except OSError:
        pass
    fd = os.open(os.devnull, os.O_WRONLY)
    if fd != 1:
        os.dup2(fd, 1)
        os.close(fd)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - Python's own stdout was None
    return True


def release(answer: IO[bytes]) -> None:
    """Close the answer stream so the reader sees end-of-file, even if the reader has gone away."""
    with contextlib.suppress(OSError, ValueError):
        answer.flush()
    with contextlib.suppress(OSError, ValueError):
        answer.close()  # closes the descriptor even when the flush fails (reader gone)


class PassThrough:
    """Stream an input too big to hold: ``head`` (read already), then what is left in ``rest``, to ``out``
    as it arrives, byte for byte, or (``fields`` given) as the unpruned JSON answer, ``head`` and
    ``rest`` streamed into ``"text"`` piece by piece and the line counts, known only at the end, after it.

    ``stop`` (the signal watcher's) waits for the piece in hand to be written, then ends the answer
    (the JSON object closed): no byte already read is dropped, however long the producer hangs.
    ``fields`` is a PruneResult's ``to_dict()`` (its ``text``, ``spans``, ``kept_lines`` and
    ``total_lines`` are replaced here).
    """

    def __init__(self, out: IO[bytes], head: bytes, rest: IO[bytes], fields: dict | None, chunk: int):
        import codecs

        self.out, self.head, self.rest, self.fields, self.chunk = out, head, rest, fields, chunk
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._newlines = 0
        self._lock = threading.Lock()  # held while a piece is read and written, and while the answer ends
        self._ended = False

    def run(self) -> None:
        try:
            fd: int | None = self.rest.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        with self._lock:
            if self._ended:
                threading.Event().wait()  # stopped: the caller of stop() ends the process
            if self.fields is not None:
                self.out.write(b'{"text": "')
            self._write(self.head)
        while True:
            if fd is not None:  # wait for input outside the lock: a signal meanwhile ends the answer at once
                select.select([fd], [], [])
            with self._lock:
                if self._ended:
                    break
                piece = self.rest.read1(self.chunk) if hasattr(self.rest, "read1") else self.rest.read(self.chunk)
                if piece is None:  # a non-blocking input with nothing yet
                    continue
                if not piece:
                    self._end(None)
                    return
                self._write(piece)
        threading.Event().wait()  # stopped: the caller of stop() ends the process

    def stop(self, reason: str | None = None, wait_s: float = 5.0) -> None:
        """End the answer now with what was read (``reason`` replaces the JSON's); from another thread,
        which then ends the process (``run`` never returns once stopped)."""
        if not self._lock.acquire(timeout=wait_s):  # a write blocked on a reader that stopped reading
            return
        try:
            if not self._ended:
                self._end(reason)
        except (OSError, ValueError):
            pass
        finally:
            self._lock.release()

    def _write(self, piece: bytes) -> None:
        if self.fields is None:
            self.out.write(piece)
        else:
            text = self._decoder.decode(piece)
            self._newlines += text.count("\n")
            self.out.write(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", errors="replace"))
        self.out.flush()

    def _end(self, reason: str | None) -> None:
        self._ended = True
        if self.fields is not None:
            text = self._decoder.decode(b"", final=True)
            self._newlines += text.count("\n")
            self.out.write(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", errors="replace"))
            n = self._newlines + 1  # as spans.split_lines counts: a trailing newline makes an empty last line
            tail = {k: v for k, v in self.fields.items() if k != "text"}
            tail |= {"spans": [[1, n]], "kept_lines": n, "total_lines": n} | ({"reason": reason} if reason else {})
            self.out.write(b'", ' + json.dumps(tail, ensure_ascii=False).encode("utf-8", errors="replace")[1:] + b"\n")
        self.out.flush()
