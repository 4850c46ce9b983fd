"""Import labelled data in any supported format (the released Squeez SFT, labelled and encoder rows,
the cases format, our own rows) into canonical Parquet, skipping and reporting bad rows.

    python jobs/import_data.py released/encoder_train.jsonl --out data/imported/train.parquet
    python jobs/import_data.py KRLabsOrg/some-dataset --split train --out data/imported/train.parquet --strict

Writes ``--out`` and ``--out`` + ``.summary.json`` (rows read, imported, skipped, ambiguous, and the
first bad rows with file, row and field) atomically; never modifies the input. ``--strict`` stops at
the first bad row (exit 2) instead of skipping it.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.schema import DataError, import_examples, write_examples

    rows, summary = import_examples(args.input, args.format, strict=args.strict, split=args.split)
    if not rows:
        raise DataError(f"no row could be imported ({summary.skipped} bad)", path=args.input)
    write_examples(rows, args.out)
    report = {"input": args.input, "out": args.out, **summary.to_dict()}
    write_json_atomic(args.out + ".summary.json", report)
    for error in summary.errors[:5]:
        print(f"skipped: {error['message']}", file=sys.stderr)
    return Outcome(summary={k: v for k, v in report.items() if k != "errors"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help=".jsonl / .parquet file, folder of .parquet files, saved dataset, or hub dataset id")
    parser.add_argument("--out", required=True, help="canonical rows to write (.parquet or .jsonl)")
    parser.add_argument("--format", help="force the row format (canonical, cases, squeez, encoder); default: from columns")
    parser.add_argument("--split", help="one split of a dataset holding several")
    parser.add_argument("--strict", action="store_true", help="stop at the first bad row instead of skipping it")
    return run_job("import_data", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
