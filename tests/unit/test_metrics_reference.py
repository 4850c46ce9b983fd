"""A plain reference implementation of METRICS.md's fuzzy F1, and checks that the fast one agrees.

The reference scores every (pred, gold) pair, keeps those >= 0.5, sorts them by score (stable, so
equal scores keep pred-then-gold order) and matches greedily. tests/bench/bench_metrics.py imports
``reference_fuzzy_scores`` from this file to time the fast version against it.
"""

from __future__ import annotations

import random

import pytest

from squeez_ray.metrics import fuzzy_scores


def reference_pair_score(a: str, b: str) -> float:
    if a == b:
        return 1.0
    if a in b or b in a:
        return min(len(a), len(b)) / max(len(a), len(b))
    x = {a[i:i + 2] for i in range(len(a) - 1)}
    y = {b[i:i + 2] for i in range(len(b) - 1)}
    if not x or not y:
        return 0.0
    return 2 * len(x & y) / (len(x) + len(y))


def reference_fuzzy_scores(pred: list[str], gold: list[str]) -> tuple[float, float, float]:
    if not pred and not gold:
        return 1.0, 1.0, 1.0
    if not pred or not gold:
        return 0.0, 0.0, 0.0
    candidates = []
    for i, a in enumerate(pred):
        for j, b in enumerate(gold):
            score = reference_pair_score(a, b)
            if score >= 0.5:
                candidates.append((score, i, j))
    candidates.sort(key=lambda c: -c[0])
    used_pred, used_gold = set(), set()
    for _, i, j in candidates:
        if i not in used_pred and j not in used_gold:
            used_pred.add(i)
            used_gold.add(j)
    tp = len(used_pred)
    precision, recall = tp / len(pred), tp / len(gold)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def random_line(rng: random.Random) -> str:
    # A small alphabet and short lines make equal lines, substrings and ~0.5 Dice scores common.
    return "".join(rng.choice("abcd ") for _ in range(rng.randint(1, 9))).strip() or "a"


@pytest.mark.parametrize("seed", range(300))
def test_fast_fuzzy_equals_reference_on_random_lines(seed):
    rng = random.Random(seed)
    pred = [random_line(rng) for _ in range(rng.randint(0, 12))]
    gold = [random_line(rng) for _ in range(rng.randint(0, 8))]
    if rng.random() < 0.3:  # duplicates and shared lines
        pred += rng.sample(gold, k=min(len(gold), 2)) * 2
    assert fuzzy_scores(pred, gold) == reference_fuzzy_scores(pred, gold)


def test_fast_fuzzy_equals_reference_on_public_cases(public_cases_path):
    from squeez_ray.metrics import norm
    from squeez_ray.schema import read_examples
    from squeez_ray.spans import kept_text, split_lines

    for row in read_examples(public_cases_path):
        lines = split_lines(row["tool_output"])
        gold = norm(kept_text(lines, [(s["start_line"], s["end_line"]) for s in row["gold_spans"]]))
        pred = norm("\n".join(lines[: max(1, len(lines) // 5)]))
        assert fuzzy_scores(pred, gold) == reference_fuzzy_scores(pred, gold), row["instance_id"]
