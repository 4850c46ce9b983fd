"""Labelled examples -> training windows with one 0/1 label per window line.

Used inside Ray Data ``map_batches`` (one tokenizer per actor) and directly by tests.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from squeez_ray.infer.encoder.scoring import windows_for
from squeez_ray.infer.encoder.windows import WindowSpec


def line_labels(n_lines: int, gold_spans: Iterable[Any]) -> np.ndarray:
    labels = np.zeros(n_lines, dtype=np.float32)
    # Ray Data hands spans over as a numpy array of dicts: test for None, never for truthiness.
    for span in [] if gold_spans is None else gold_spans:
        start, end = (span["start_line"], span["end_line"]) if isinstance(span, dict) else span
        labels[int(start) - 1:int(end)] = 1.0
    return labels


def example_windows(tokenizer: Any, spec: WindowSpec, row: dict[str, Any], *, max_windows: int,
                    rng: np.random.Generator) -> list[dict[str, Any]]:
    """Windows of one example, each with its lines' labels.

    Long outputs give many windows, almost all without a relevant line; keeping every window with a
    positive plus a few sampled others (``max_windows`` in all) spends training compute where the
    decision is, while the class-weighted loss keeps the negative lines' share honest.
    """
    n_lines, windows = windows_for(tokenizer, row["query"], row["tool_output"], spec)
    labels = line_labels(n_lines, row.get("gold_spans"))
    rows = []
    for w in windows:
        window_labels = labels[w.first_line:w.first_line + w.n_lines]
        rows.append({"input_ids": w.input_ids, "token_type_ids": w.token_type_ids,
                     "line_of_token": w.line_of_token, "labels": window_labels.tolist(),
                     "has_positive": bool(window_labels.any())})
    positive = [r for r in rows if r["has_positive"]]
    negative = [r for r in rows if not r["has_positive"]]
    room = max(max_windows - len(positive), 0)
    if len(negative) > room:
        picks = rng.choice(len(negative), size=room, replace=False) if room else []
        negative = [negative[i] for i in sorted(picks)]
    return (positive + negative)[:max(max_windows, len(positive))]


class WindowTokenizer:
    """Ray Data callable class: a batch of labelled rows -> a batch of training windows."""

    def __init__(self, tokenizer_dir: str, spec: dict[str, Any], max_windows: int, seed: int = 0):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        self.spec = WindowSpec(**spec)
        self.max_windows = max_windows
        self.rng = np.random.default_rng(seed)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "line_of_token": [], "labels": []}
        keys = list(batch)
        for i in range(len(batch[keys[0]])):
            row = {k: batch[k][i] for k in ("query", "tool_output", "gold_spans")}
            for w in example_windows(self.tokenizer, self.spec, row, max_windows=self.max_windows, rng=self.rng):
                for k in out:
                    out[k].append(np.asarray(w[k]))
        return out


def collate(batch: dict[str, Any], pad_id: int):
    """A numpy batch of windows -> padded tensors plus a (B, L) label matrix with -1 for padding."""
    import torch

    from squeez_ray.infer.encoder.windows import pad_windows

    ids, mask, types, owner = pad_windows(batch["input_ids"], batch["token_type_ids"], batch["line_of_token"], pad_id)
    labels = torch.full((len(batch["labels"]), max(len(x) for x in batch["labels"])), -1.0)
    for i, window_labels in enumerate(batch["labels"]):
        labels[i, :len(window_labels)] = torch.as_tensor(window_labels)
    return ids, mask, types, owner, labels
