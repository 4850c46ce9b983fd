"""The command's answer stream: stdout holds only the answer, whatever engines print meanwhile.

Shared by ``squeez`` (prune) and ``squeez show``: the exit codes, the stderr note, and the
reservation of the real stdout while a backend runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
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


def release(answer: IO[bytes]) -> None:
    """Close the answer stream so the reader sees end-of-file, even if the reader has gone away."""
    with contextlib.suppress(OSError, ValueError):
        answer.flush()
    with contextlib.suppress(OSError, ValueError):
        answer.close()  # closes the descriptor even when the flush fails (reader gone)


def write_unpruned_json(out: IO[bytes], head: bytes, rest: IO[bytes], fields: dict, chunk: int) -> None:
    """The unpruned JSON answer for an input too big to hold in memory: ``head`` then ``rest`` are
    streamed into ``"text"`` piece by piece; the line counts, known only at the end, come after it.

    ``fields`` is a PruneResult's ``to_dict()`` (its ``text``, ``spans``, ``kept_lines`` and
    ``total_lines`` are replaced here)."""
    import codecs
    import json

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out.write(b'{"text": "')
    newlines = 0
    piece = head
    while True:
        final = not piece
        text = decoder.decode(piece, final=final)
        newlines += text.count("\n")
        out.write(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", errors="replace"))
        if final:
            break
        piece = rest.read(chunk)
    n = newlines + 1  # as spans.split_lines counts: a trailing newline makes an empty last line
    tail = {k: v for k, v in fields.items() if k != "text"} | {"spans": [[1, n]], "kept_lines": n, "total_lines": n}
    out.write(b'", ' + json.dumps(tail, ensure_ascii=False).encode("utf-8", errors="replace")[1:] + b"\n")
