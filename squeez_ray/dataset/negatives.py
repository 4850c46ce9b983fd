"""Explicit negatives: a query paired with the output of a different tool, whose gold is empty.

A pruner must learn to return nothing when the output cannot answer the query (Squeez-2B returns
empty on 80% of negatives; zero-shot models on 7%). Pairs are drawn inside one split, so a negative
never carries a test repository's text into train, and a pair is skipped when the output mentions
an identifier the query names (then it might answer the query after all).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from squeez_ray.dataset.splits import group_of

NEGATIVE_SOURCE = "synthetic_negative"

_TOKEN = re.compile(r"[A-Za-z_][\w./-]{3,}")


def _identifiers(query: str) -> set[str]:
    """Tokens that look like code names (snake_case, dotted, paths, CamelCase, with digits)."""
    out = set()
    for token in _TOKEN.findall(query):
        token = token.rstrip(".?,:;")
        if any(c in token for c in "_./") or any(c.isdigit() for c in token) or \
                (token[1:] != token[1:].lower() and not token.isupper()):
            out.add(token)
    return out


def negatives_needed(n_positives: int, share: float) -> int:
    """How many negatives make them ``share`` of the final set."""
    if share <= 0 or n_positives == 0:
        return 0
    return round(share / (1 - share) * n_positives)


def make_negatives(examples: Sequence[Mapping[str, Any]], count: int, seed: int = 0,
                   max_tries_per_negative: int = 20) -> list[dict[str, Any]]:
    """``count`` negatives from ``examples`` (positives of one split), deterministic for a seed."""
    positives = [e for e in examples if not e.get("is_irrelevant")]
    if count <= 0 or len({e["tool_type"] for e in positives}) < 2:
        return []
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    used: set[tuple[int, int]] = set()
    for _ in range(count * max_tries_per_negative):
        if len(out) >= count:
            break
        a, b = rng.randrange(len(positives)), rng.randrange(len(positives))
        asker, holder = positives[a], positives[b]
        if (a, b) in used or asker["tool_type"] == holder["tool_type"] or asker["instance_id"] == holder["instance_id"]:
            continue
        used.add((a, b))
        if any(name in holder["tool_output"] for name in _identifiers(asker["query"])):
            continue
        digest = hashlib.sha256(f"{asker['instance_id']}|{asker['query']}|{holder['instance_id']}|"
                                f"{holder.get('command')}".encode()).hexdigest()[:10]
        out.append({
            "instance_id": f"{holder['instance_id']}::neg-{digest}",
            "source": NEGATIVE_SOURCE,
            "tool_type": holder["tool_type"],
            "query": asker["query"],
            "background_task": asker.get("background_task"),
            "tool_output": holder["tool_output"],
            "gold_spans": [],
            "is_irrelevant": True,
            "command": holder.get("command"),
            "repo": holder.get("repo"),
            "split": holder.get("split"),
            "split_group_id": group_of(holder),
            "notes": f"query from {asker['instance_id']} ({asker['tool_type']})",
        })
    return out
