"""Quality control numbers for hand labels (LABELLING.md "Quality control").

- ``blind_agreement``: pass B relabelled some pass A examples blind (same output, same query, no
  gold shown); line-level F1 between the two gold line sets, per family, and how often both agree
  that an example is a negative. Where a revision pass (W, issue #35) replaced an example's gold, pass
  B is compared with the revised gold, the one the built splits carry; ``revised`` gives those pairs'
  F1 against both the revised and the first gold.
- ``rule_agreement``: what the rule teacher is worth, per family: on the same outputs, how often it
  labels at all and the line-level F1 of its lines against the hand gold (its queries are its own,
  so this measures whether it points at the lines a reader would pick).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from statistics import mean
from typing import Any


def line_set(gold: Iterable[Sequence[int]]) -> set[int]:
    return {i for start, end in gold for i in range(start, end + 1)}


def line_f1(a: set[int], b: set[int]) -> float:
    """Position-aware F1 of two line sets (METRICS.md's line-index F1: both empty agree fully, exactly
    one empty not at all)."""
    from squeez_ray.metrics import line_index_scores

    return line_index_scores(a, b)[2]


def _key(row: Mapping[str, Any]) -> tuple[str, str]:
    return str(row["output_id"]), " ".join(str(row["query"]).lower().split())


def blind_agreement(labels: Sequence[Mapping[str, Any]], pool: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    from squeez_ray.label.hand.labels import REVISION_PASSES

    first = {_key(r): r for r in labels if r.get("pass") == "A"}
    revised = {_key(r): r for r in labels if r.get("pass") in REVISION_PASSES and _key(r) in first}
    pairs = [(revised.get(_key(r), first[_key(r)]), r) for r in labels if r.get("pass") == "B" and _key(r) in first]
    by_family: dict[str, list[float]] = defaultdict(list)
    against_revised: list[float] = []
    against_first: list[float] = []
    negatives = both_negative = 0
    for a, b in pairs:
        gold_a, gold_b = line_set(a["gold"]), line_set(b["gold"])
        score = line_f1(gold_a, gold_b)
        by_family[pool[a["output_id"]]["family"]].append(score)
        if a.get("pass") in REVISION_PASSES:
            against_revised.append(score)
            against_first.append(line_f1(line_set(first[_key(a)]["gold"]), gold_b))
        if not gold_a or not gold_b:
            negatives += 1
            both_negative += not gold_a and not gold_b
    scores = [s for family in by_family.values() for s in family]
    return {
        "pairs": len(pairs),
        "line_f1": round(mean(scores), 3) if scores else None,
        "exact": round(sum(s == 1.0 for s in scores) / len(scores), 3) if scores else None,
        "negatives_either": negatives,
        "negatives_agreed": round(both_negative / negatives, 3) if negatives else None,
        "revised": {"pairs": len(against_revised),
                    "line_f1": round(mean(against_revised), 3) if against_revised else None,
                    "line_f1_first": round(mean(against_first), 3) if against_first else None},
        "by_family": {f: {"pairs": len(v), "line_f1": round(mean(v), 3)} for f, v in sorted(by_family.items())},
    }


def rule_agreement(labels: Sequence[Mapping[str, Any]], pool: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    from squeez_ray.label.rules import RuleLabel, label_with_rules

    by_family: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"f1": [], "labelled": []})
    for row in labels:
        if row.get("pass") != "A" or not row["gold"]:
            continue  # the rule teacher writes no negatives of its own: compare positives
        output = pool[row["output_id"]]
        result = label_with_rules({"tool_type": _rule_tool_type(output["family"]), "tool_output": output["tool_output"],
                                   "command": output["command"], "repo": output["source"], "background_task": ""})
        stats = by_family[output["family"]]
        labelled = isinstance(result, RuleLabel)
        stats["labelled"].append(float(labelled))
        stats["f1"].append(line_f1(line_set(result.spans), line_set(row["gold"])) if labelled else 0.0)
    table = {f: {"examples": len(v["f1"]), "rule_labels": round(mean(v["labelled"]), 3),
                 "line_f1": round(mean(v["f1"]), 3)} for f, v in sorted(by_family.items())}
    scores = [s for v in by_family.values() for s in v["f1"]]
    return {"examples": len(scores), "line_f1": round(mean(scores), 3) if scores else None, "by_family": table}


# The rule teacher knows the collector's tool types; the hand families are named as the public cases.
_RULE_TOOL_TYPE = {"lint": "lint_output", "ls_find": "ls", "python_traceback": "python", "logs": "build_output"}


def _rule_tool_type(family: str) -> str:
    return _RULE_TOOL_TYPE.get(family, family)
