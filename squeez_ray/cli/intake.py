"""Reading the tool output: from stdin or ``--input-file``, in pieces, at most up to the size cap.

Pieces, because a signal can come while a hung producer is still writing: what was read so far is
in the caller's buffer, ready to be passed through. Up to the cap + 1 byte, because that decides
whether the output can be pruned; beyond the cap the rest is left unread, to be streamed through.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO

from squeez_ray.cli.args import UsageError

CHUNK = 1 << 20


@dataclass
class Input:
    data: bytes  # the bytes read (a prefix only when ``rest`` is set)
    rest: IO[bytes] | None = None  # still unread: the input was over max_input_mb and is streamed


def open_input(input_file: str | None) -> IO[bytes]:
    if input_file:
        try:
            return open(input_file, "rb")
        except OSError as error:
            raise UsageError(f"cannot read --input-file {input_file}: {error.strerror}") from None
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("no input: pipe a command's output into squeez (cmd | squeez \"query\") "
                         "or pass --input-file FILE")
    return sys.stdin.buffer


def read_capped(handle: IO[bytes], limit: int, into: bytearray) -> Input:
    """Read into ``into`` until end of input or ``limit`` + 1 bytes; the rest stays in ``handle``."""
    while len(into) <= limit:
        piece = handle.read1(min(CHUNK, limit + 1 - len(into)))  # type: ignore[attr-defined]
        if not piece:
            break
        into += piece
    data = bytes(into)
    return Input(data, rest=handle if len(data) > limit else None)
