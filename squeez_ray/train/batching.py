"""Token-budget batching: group examples of similar length so a padded batch stays under a token budget.

A fixed count padded to the longest example makes one 20,000-token example cost 8 x 20,000 tokens of
activations. Here examples are sorted by length and cut into batches whose padded size
(examples x longest) stays within ``max_tokens`` and whose count stays within ``max_examples``; the
batch order is then shuffled with a seed, so a run is reproducible and a resumed run (which skips the
batches it already trained on) sees the same batches in the same order.

Ray Train splits the batch rows equally across workers, and DDP needs every worker to take the same
number of steps, so the batch count is made a multiple of the worker count by splitting the largest
batches (every example still trained on once per epoch, unless every batch holds one example; then
the last few are left out, as Ray's equal split would).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class BatchPlanError(ValueError):
    """The budget cannot hold an example, or there are fewer examples than workers."""


def plan_token_batches(lengths: Sequence[int], *, max_tokens: int, max_examples: int, seed: int = 0,
                       num_workers: int = 1) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches: padded size <= max_tokens, size <= max_examples."""
    too_long = [i for i, n in enumerate(lengths) if n > max_tokens]
    if too_long:
        raise BatchPlanError(f"{len(too_long)} examples are longer than the token budget {max_tokens} "
                             f"(longest {max(lengths[i] for i in too_long)}): raise train.max_tokens_per_batch "
                             f"to at least data.max_seq_length")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        grown = max(width, lengths[i])
        if current and (grown * (len(current) + 1) > max_tokens or len(current) >= max_examples):
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        width = grown
    if current:
        batches.append(current)
    batches = _divisible(batches, num_workers, lengths)
    random.Random(seed).shuffle(batches)
    return batches


def _divisible(batches: list[list[int]], num_workers: int, lengths: Sequence[int]) -> list[list[int]]:
    """Split the largest batches until the count is a multiple of ``num_workers`` (halves stay under budget)."""
    if num_workers < 1:
        raise BatchPlanError(f"num_workers: {num_workers} must be >= 1")
    total = sum(len(b) for b in batches)
    if total < num_workers:
        raise BatchPlanError(f"{total} training examples cannot be split across {num_workers} workers")
    while len(batches) % num_workers:
        biggest = max(range(len(batches)), key=lambda k: (len(batches[k]), -k))
        if len(batches[biggest]) == 1:  # single-example batches only: equal steps need a few left out
            return batches[:len(batches) - len(batches) % num_workers]
        batch = batches.pop(biggest)
        half = len(batch) // 2
        batches[biggest:biggest] = [batch[:half], batch[half:]]
    return batches


def padded_tokens(batch: Sequence[int], lengths: Sequence[int]) -> int:
    """Tokens a right-padded batch occupies: examples x longest."""
    return len(batch) * max(lengths[i] for i in batch)
