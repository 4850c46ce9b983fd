"""How often the head-and-tail fallback fires on labelled cases, and what it costs (docs/CLI.md).

    .venv/bin/python scripts/fallback_rate.py ../shared/eval/public_cases.jsonl            # the shipped encoder
    .venv/bin/python scripts/fallback_rate.py ../shared/eval/public_cases.jsonl --backend bm25

Evaluation only: nothing here is fitted on the cases (the fallback's rule and sizes were set before
it ran). Each case is pruned once, as ``squeez`` would (the CLI's settings and operating point); the
model's spans are then scored as they are and after ``cli.pruning.never_empty``. Prints, for positives
(non-empty gold) and negatives: cases, empty model answers, fallbacks, gold lines kept (line recall)
and compression (METRICS.md: 1 - answer lines / output lines, an empty answer counting one line).
"""

from __future__ import annotations

import argparse
import json
import sys

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.pruning import is_fallback, never_empty
from squeez_ray.infer.base import PruneRequest, RenderOptions
from squeez_ray.infer.registry import build_pruner
from squeez_ray.spans import count_lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", help="labelled cases, JSON Lines with query, output, gold (spans)")
    parser.add_argument("--backend", help="default: as configured, else the shipped encoder")
    args = parser.parse_args(argv)
    settings = settings_mod.resolve({"backend": args.backend})
    with open(args.cases, encoding="utf-8") as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    pruner = build_pruner(settings.backend, settings_mod.backend_options(settings))
    try:
        results = pruner.prune_batch([PruneRequest(c["query"], c["output"], c.get("tool")) for c in cases],
                                     render_options=RenderOptions(), fail_open=True)
    finally:
        pruner.close()
    rows = {"positives": _Tally(), "negatives": _Tally()}
    for case, result in zip(cases, results, strict=True):
        tally = rows["positives" if case["gold"] else "negatives"]
        total = len(case["output"].split("\n"))
        gold = {n for start, end in case["gold"] for n in range(start, end + 1)}
        before = [list(s) for s in result.spans]
        after = never_empty(result, case["query"], case["output"], RenderOptions()).spans
        tally.add(total, gold, before, after, fired=is_fallback(result))
    print(f"backend {settings.backend} on {args.cases} ({len(cases)} cases)")
    print("| cases | n | model kept nothing | fallback fired | gold lines kept: model / with fallback "
          "| compression: model / with fallback |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, t in rows.items():
        recall = f"{t.recall(t.kept_before)} / {t.recall(t.kept_after)}" if t.gold else "-"
        print(f"| {name} | {t.n} | {t.empty} | {t.fired} | {recall} | "
              f"{t.compression(t.lines_before):.3f} / {t.compression(t.lines_after):.3f} |")
    return 0


class _Tally:
    def __init__(self) -> None:
        self.n = self.empty = self.fired = self.gold = self.kept_before = self.kept_after = 0
        self.lines_before: list[float] = []
        self.lines_after: list[float] = []

    def add(self, total: int, gold: set[int], before: list, after: list, *, fired: bool) -> None:
        self.n, self.fired = self.n + 1, self.fired + int(fired)
        self.empty += int(not before)
        self.gold += len(gold)
        self.kept_before += sum(1 for s, e in before for n in range(s, e + 1) if n in gold)
        self.kept_after += sum(1 for s, e in after for n in range(s, e + 1) if n in gold)
        self.lines_before.append(1 - max(1, count_lines(before)) / total)
        self.lines_after.append(1 - max(1, count_lines(after)) / total)

    def recall(self, kept: int) -> str:
        return f"{kept / self.gold:.3f}" if self.gold else "-"

    @staticmethod
    def compression(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
