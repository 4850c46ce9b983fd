"""Hand labelling: render batches of collected outputs for a labeller, check label files, merge them.

    # 1. collect real outputs into a pool (JSONL or Parquet; see docs/HANDLABEL.md)
    python jobs/collect_pool.py python --cache runs/encoder_data_cache --repo . --out runs/handlabel/pool/python.jsonl
    python jobs/collect_pool.py ecosystems --out runs/handlabel/pool/ecosystems.jsonl
    # 2. batches to read: numbered lines, tool, command (outputs already labelled are left out)
    python jobs/hand_label.py render --pool runs/handlabel/pool --labels data/handlabel/labels --out runs/handlabel/batches
    # 3. a labeller writes labels/batch-007.A.jsonl by reading batch-007.txt; check it as often as you like
    python jobs/hand_label.py check data/handlabel/labels/batch-007.A.jsonl --pool runs/handlabel/pool
    # 4. merge every label file into the dataset (QA, splits by source, Parquet)
    python jobs/hand_label.py merge --pool runs/handlabel/pool --labels data/handlabel/labels --out data/handlabel
    # (a fresh clone has no pool: the stored outputs are one, --pool data/handlabel/outputs.parquet)
    # 5. agreement figures and the datasheet; prompt/response rows for SFT
    python jobs/hand_label.py report --data data/handlabel
    python jobs/hand_label.py export --data data/handlabel --out runs/handlabel/squeez

Exit codes: 0 ok, 1 label problems found (each printed as file: row: field: message), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def _step(args: argparse.Namespace) -> Outcome:
    from squeez_ray.dataset import hand_label as steps

    if args.command == "render":
        code = steps.render(args.pool, args.out, args.labels, args.family, args.exclude, args.batch_outputs,
                            args.batch_lines, args.limit, args.blind, args.second, args.seed)
    elif args.command == "check":
        code = steps.check(args.files, args.pool)
    elif args.command == "merge":
        code = steps.merge(args.pool, args.labels, args.out, args.skip_bad, args.seed, args.place)
    elif args.command == "report":
        code = steps.report(args.data)
    else:
        code = steps.export(args.data, args.out)
    return Outcome(exit_code=code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("render", help="write batches of unlabelled pool outputs for a labeller")
    p.add_argument("--pool", nargs="+", required=True, help="pool files or folders (JSONL / Parquet)")
    p.add_argument("--labels", nargs="*", help="label files or folders: their outputs are left out")
    p.add_argument("--out", required=True, help="folder for batch-NNN.txt / batch-NNN.json")
    p.add_argument("--family", action="append", help="only this family (repeatable)")
    p.add_argument("--exclude", nargs="*", help="batch-NNN.json files handed out already: leave their outputs out")
    p.add_argument("--batch-outputs", type=int, default=40, help="outputs per batch at most")
    p.add_argument("--batch-lines", type=int, default=8000, help="numbered lines per batch at most")
    p.add_argument("--limit", type=int, help="write at most this many batches")
    p.add_argument("--blind", type=int, metavar="N",
                   help="instead: N pass-A examples of --labels for a blind second labelling (queries, no gold)")
    p.add_argument("--second", action="store_true",
                   help="instead: outputs of --family labelled once, for a second, different example each")
    p.add_argument("--seed", type=int, default=0)
    p = commands.add_parser("check", help="validate label files against the pool")
    p.add_argument("files", nargs="+", help="label files (JSONL) or folders of them")
    p.add_argument("--pool", nargs="+", required=True)
    p = commands.add_parser("merge", help="validate all label files and build the dataset")
    p.add_argument("--pool", nargs="+", required=True)
    p.add_argument("--labels", nargs="+", required=True, help="label files or folders")
    p.add_argument("--out", required=True, help="dataset folder (data/handlabel)")
    p.add_argument("--skip-bad", action="store_true", help="merge the good rows even when some rows have problems")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--place", action="append", metavar="SOURCE=SPLIT",
                   help="put a new source in a split chosen before labelling (e.g. logs:vllm=dev); repeatable")
    p = commands.add_parser("report", help="agreement figures and the datasheet of a merged set")
    p.add_argument("--data", default="data/handlabel", help="the merged set (outputs.parquet, labels/, splits)")
    p = commands.add_parser("export", help="write the splits as released-Squeez prompt/response JSONL")
    p.add_argument("--data", default="data/handlabel")
    p.add_argument("--out", required=True)
    return run_job("hand_label", _step, argv, parser=parser,
                   errors=(FileNotFoundError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
