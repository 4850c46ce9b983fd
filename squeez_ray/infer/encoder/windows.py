"""Pack a query and an output's lines into encoder windows, each line marked so it can be pooled.

Layout of one window: ``[CLS] query [SEP] line_a [SEP] line_b [SEP] ...``. The ``[SEP]`` closing each
line is its marker: a line's score pools its own tokens plus that marker, so even an empty line
has one token. Lines are tokenised once per output (one fast-tokenizer call), capped at
``max_tokens_per_line`` (the start of a line carries most of its meaning, and the cap bounds cost
on minified or base64 lines), and windows overlap by ``overlap_lines`` so a line near a window's
edge also gets seen with context on both sides; its final score is its best over windows.
Tokenization is ``tokens.LineTokenizer``'s; everything here is plain Python and numpy, shared by the
torch and the ONNX runtimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass
class Window:
    input_ids: list[int]
    token_type_ids: list[int]
    line_of_token: list[int]  # per token: index of the window line it belongs to, -1 for query/specials
    first_line: int  # 0-based index in the output of the window's first line
    n_lines: int


@dataclass(frozen=True)
class WindowSpec:
    max_length: int = 512  # tokens per window (query + lines)
    max_query_tokens: int = 64  # query tokens kept per window
    max_tokens_per_line: int = 32  # tokens kept per output line
    overlap_lines: int = 4  # lines shared by consecutive windows


def build_windows(query_ids: Sequence[int], line_ids: Sequence[Sequence[int]], spec: WindowSpec,
                  cls_id: int, sep_id: int) -> list[Window]:
    """Greedy line-aligned windows within ``spec.max_length`` tokens, overlapping by whole lines."""
    head = [cls_id, *list(query_ids)[: spec.max_query_tokens], sep_id]
    budget = spec.max_length - len(head)
    if budget < 2:
        raise ValueError(f"max_length={spec.max_length} leaves no room for lines after the query")
    windows: list[Window] = []
    start = 0
    n = len(line_ids)
    while start < n or (n == 0 and not windows):
        ids = list(head)
        types = [0] * len(head)
        owner = [-1] * len(head)
        end = start
        while end < n:
            piece = list(line_ids[end])[: budget - 1] + [sep_id]  # a line never exceeds one window
            if len(ids) + len(piece) > spec.max_length and end > start:
                break
            ids.extend(piece)
            types.extend([1] * len(piece))
            owner.extend([end - start] * len(piece))
            end += 1
        windows.append(Window(ids, types, owner, start, end - start))
        if end >= n:
            break
        start = max(start + 1, end - spec.overlap_lines)
    return windows


def pad_windows_np(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]],
                   line_of_token: Sequence[Sequence[int]], pad_id: int):
    """Pad per-window token lists into int64 arrays (input_ids, attention_mask, token_type_ids,
    line_of_token): the inputs of both runtimes (torch wraps them without a copy)."""
    size = (len(input_ids), max(len(ids) for ids in input_ids))
    ids_out = np.full(size, pad_id, dtype=np.int64)
    attention = np.zeros(size, dtype=np.int64)
    types = np.zeros(size, dtype=np.int64)
    owner = np.full(size, -1, dtype=np.int64)
    for i, (ids, window_types, window_owner) in enumerate(zip(input_ids, token_type_ids, line_of_token)):
        k = len(ids)
        ids_out[i, :k] = ids
        attention[i, :k] = 1
        types[i, :k] = window_types
        owner[i, :k] = window_owner
    return ids_out, attention, types, owner


def pad_windows(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]],
                line_of_token: Sequence[Sequence[int]], pad_id: int):
    """The same as torch tensors (training and the torch runtime)."""
    import torch

    return tuple(torch.from_numpy(a) for a in pad_windows_np(input_ids, token_type_ids, line_of_token, pad_id))


def window_batch_tensors(windows: Sequence[Window], pad_id: int):
    """Pad a list of windows into tensors (input_ids, attention_mask, token_type_ids, line_of_token)."""
    return pad_windows([w.input_ids for w in windows], [w.token_type_ids for w in windows],
                       [w.line_of_token for w in windows], pad_id)
