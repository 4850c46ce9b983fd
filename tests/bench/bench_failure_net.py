"""What `squeez run`'s failure safety net (squeez_ray/cli/failure_lines.py) does to recall and compression.

    .venv/bin/python tests/bench/bench_failure_net.py [--data ../shared/eval/public_cases.jsonl] \\
        [--backend encoder] [--model DIR]

Evaluation only: the rule was written before this ran, and nothing here tunes it. The public cases
carry no exit codes, so the net is shown two ways: as if **every** command had failed (the upper
bound of what it can cost: on a success it adds nothing), and on the families where a failure is a
realistic outcome of the command (tests, builds, lint, tracebacks, installers). Prints, per
setting: mean recall (METRICS.md), the same over the cases that have gold lines, line recall, line
compression, the share of negative cases left empty, and the lines the net added (over all cases).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from squeez_ray.cli.failure_lines import failure_line_numbers
from squeez_ray.metrics import score_example, summarize
from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.spans import normalize_spans, split_lines

REPO = Path(__file__).resolve().parents[2]
FAILURE_PRONE = {"test_output", "build_output", "lint", "python_traceback", "pip_install"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--backend", default="encoder")
    parser.add_argument("--model", default=None, help="checkpoint (default: the shipped encoder)")
    args = parser.parse_args()
    cases = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    pruner = build_pruner(args.backend, BackendOptions(model=args.model))
    results = pruner.prune_batch([PruneRequest(c["query"], c["output"], c.get("tool")) for c in cases],
                                 fail_open=False)
    settings = {"model only": [], "net, every command failed": [], "net, failure-prone families failed": []}
    added = {name: 0 for name in settings}
    for case, result in zip(cases, results):
        lines = split_lines(case["output"])
        forced = failure_line_numbers(lines, exit_code=1)
        for name, apply in (("model only", False), ("net, every command failed", True),
                            ("net, failure-prone families failed", case.get("tool") in FAILURE_PRONE)):
            spans = [list(s) for s in result.spans] + ([[n, n] for n in forced] if apply else [])
            clean = normalize_spans(spans, len(lines))
            before = sum(e - s + 1 for s, e in normalize_spans(result.spans, len(lines)))
            added[name] += sum(e - s + 1 for s, e in clean) - before
            settings[name].append({**score_example(case["output"], case["gold"], clean), "tool_type": case.get("tool")})
    print(f"{len(cases)} public cases, backend {args.backend}; {sum(c.get('tool') in FAILURE_PRONE for c in cases)} "
          f"in failure-prone families ({', '.join(sorted(FAILURE_PRONE))})")
    # METRICS.md scores any line kept on a negative case (no gold lines) as recall 0, so the net's
    # extra lines lower the all-cases recall there; the cases with gold lines show what it recovers.
    header = f"{'setting':38s} {'recall':>7s} {'pos_rec':>7s} {'line_rec':>8s} {'compr':>7s} {'neg_empty':>9s}"
    for title, keep in (("all cases", lambda r: True), ("the failure-prone families only",
                                                        lambda r: r["tool_type"] in FAILURE_PRONE)):
        print(f"\n{title}:\n{header} {'lines added':>11s}")
        for name, rows in settings.items():
            rows = [r for r in rows if keep(r)]
            summary = summarize(rows)
            positives = summarize([r for r in rows if not r["is_negative"]])
            neg = summary["negatives_empty"]
            print(f"{name:38s} {summary['recall']:7.3f} {positives['recall']:7.3f} {summary['line_recall']:8.3f} "
                  f"{summary['compression']:7.3f} {'-' if neg is None else f'{neg:.3f}':>9s} {added[name]:11d}")


if __name__ == "__main__":
    main()
