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


# What a backend reads of one line: the encoder reads a line's first 32 tokens of at most 128
# characters each (docs/CLI.md), and no model reads more of a line usefully. A longer line (a
# minified bundle, a 14 MB JSON blob on one line) is cut here for the model only, so that per-line
# work (term counts, tokenizers, regexes) costs no more than for a short line; the answer still
# prints the line whole, byte for byte, when it is kept.
MODEL_LINE_CHARS = 32 * 128


def model_text(data: bytes) -> str:
    """``data`` as the model reads it: decoded (invalid UTF-8 replaced), each line cut at
    ``MODEL_LINE_CHARS``; the line count never changes, so spans over it are spans over ``data``."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= MODEL_LINE_CHARS:
        return text
    lines = text.split("\n")
    if all(len(line) <= MODEL_LINE_CHARS for line in lines):
        return text
    return "\n".join(line[:MODEL_LINE_CHARS] for line in lines)
