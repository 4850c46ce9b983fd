"""Train / dev / test splits by group: a repository for real data, a tool-family group for synthetic.

Whole groups go to one split, so no repository (or ecosystem) leaks between train and test. Groups
are ordered by a seeded hash and then filled greedily by example count toward the target ratios:
deterministic for the same data and seed, close to the ratios even with a dozen groups (where a
plain per-group hash bucket often leaves dev or test empty), and every split with a positive ratio
gets a group whenever there are at least as many groups as such splits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

SPLITS = ("train", "dev", "test")


def group_of(example: Mapping[str, Any]) -> str:
    """The split group: an explicit ``split_group_id``, else ``repo:<repo>``, else the instance."""
    if example.get("split_group_id"):
        return str(example["split_group_id"])
    if example.get("repo"):
        return f"repo:{example['repo']}"
    return f"instance:{example['instance_id']}"


def _rank(group: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()


def check_ratios(ratios: Mapping[str, float]) -> list[str]:
    problems = [f"ratios.{name}: unknown split (allowed: {', '.join(SPLITS)})" for name in ratios if name not in SPLITS]
    problems += [f"ratios.{name}: must be >= 0, got {value}" for name, value in ratios.items() if value < 0]
    total = sum(ratios.values())
    if abs(total - 1.0) > 1e-6:
        problems.append(f"ratios: must sum to 1, got {total:g} ({dict(ratios)})")
    return problems


def assign_splits(group_sizes: Mapping[str, int], ratios: Mapping[str, float], seed: int = 0,
                  pinned: Mapping[str, str] | None = None) -> dict[str, str]:
    """group -> split. ``group_sizes`` counts examples per group; ``ratios`` maps split -> share.

    ``pinned`` (group -> split) keeps groups where an earlier build put them, so a growing dataset
    never moves a source between splits (a model trained on the old train split must not find its
    sources in the new test split); only new groups are placed, toward the ratios.
    """
    problems = check_ratios(ratios)
    if problems:
        raise ValueError("; ".join(problems))
    active = [s for s in SPLITS if ratios.get(s, 0) > 0]
    assigned = {g: split for g, split in (pinned or {}).items() if g in group_sizes and split in SPLITS}
    order = sorted((g for g in group_sizes if g not in assigned), key=lambda g: _rank(g, seed))
    filled = dict.fromkeys(active, 0)
    for group, split in assigned.items():
        filled[split] = filled.get(split, 0) + group_sizes[group]
    total = sum(group_sizes.values()) or 1
    # First give each active split one group (smallest ratio first), so small sets still get dev/test.
    # The seed group is the first (in hash order) that fits the split's target, so one big
    # repository does not land in test just because it hashed first.
    empty = [s for s in active if not filled[s]]
    if len(order) >= len(empty):
        for split in sorted(empty, key=lambda s: ratios[s]):
            fits = [g for g in order if group_sizes[g] <= ratios[split] * total]
            group = fits[0] if fits else min(order, key=lambda g: (group_sizes[g], order.index(g)))
            order.remove(group)
            assigned[group] = split
            filled[split] += group_sizes[group]
    for group in order:
        # the split furthest below its target share takes the next group
        split = min(active, key=lambda s: (filled[s] / total - ratios[s], SPLITS.index(s)))
        assigned[group] = split
        filled[split] += group_sizes[group]
    return assigned
