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
import json
import sys
from pathlib import Path

from squeez_ray.runner import Outcome, run_job


def _label_files(paths: list[str]) -> list[Path]:
    from squeez_ray.label.hand.labels import label_files

    return label_files(paths)


def render(args: argparse.Namespace) -> int:
    from squeez_ray.label.hand.batches import blind_sample, plan_batches, write_batches
    from squeez_ray.label.hand.labels import read_label_rows
    from squeez_ray.collect.pool import read_pool

    pool = read_pool(args.pool)
    labels = [raw for f in _label_files(args.labels or []) if f.exists() for _, raw in read_label_rows(f)[0]]
    done = {raw.get("output_id") for raw in labels}
    for batch in args.exclude or []:  # batches handed out but not labelled yet
        done.update(json.loads(Path(batch).read_text())["output_ids"])
    queries = None
    if args.blind:  # a blind second labelling of pass-A examples: their outputs with the queries, no gold
        queries = blind_sample(labels, pool, args.blind, seed=args.seed)
        todo = [pool[i] for i in sorted(queries)]
    elif args.second:  # outputs labelled once (of --family): a second, different example of each
        asked: dict[str, list[str]] = {}
        for raw in labels:
            if raw.get("pass") == "A":
                asked.setdefault(raw["output_id"], []).append(raw["query"])
        queries = {i: q for i, q in asked.items() if len(q) == 1 and i in pool
                   and (not args.family or pool[i]["family"] in args.family)}
        todo = [pool[i] for i in sorted(queries)]
    else:
        todo = [r for r in pool.values() if r["output_id"] not in done
                and (not args.family or r["family"] in args.family)]
    out = Path(args.out)
    prefix = "blind" if args.blind else "second" if args.second else "batch"
    first = 1 + len(list(out.glob(f"{prefix}-*.txt"))) if out.exists() else 1
    batches = plan_batches(todo, max_outputs=args.batch_outputs, max_lines=args.batch_lines, seed=args.seed)
    written = write_batches(batches[: args.limit] if args.limit else batches, out, first=first, queries=queries,
                            prefix=prefix, second=bool(args.second))
    print(f"{len(pool)} outputs in the pool, {len(done)} already labelled, {len(todo)} to label: "
          f"{len(written)} batches in {out}")
    return 0


def check(args: argparse.Namespace) -> int:
    from squeez_ray.label.hand.labels import REVISION_PASSES, check_label_files, read_label_rows
    from squeez_ray.collect.pool import read_pool

    files = _label_files(args.files)
    # a revision file (widen-001.W.jsonl) is checked against the pass-A rows of the label files beside it
    folders = {str(f.parent) for f in files if f.name.endswith(tuple(f".{p}.jsonl" for p in REVISION_PASSES))}
    reference = [raw for f in _label_files(sorted(folders)) if f not in files for _, raw in read_label_rows(f)[0]]
    good, problems = check_label_files(files, read_pool(args.pool), reference=reference)
    for problem in problems:
        print(problem)
    print(f"{len(good)} good label rows, {len(problems)} problems in {len(files)} files")
    return 1 if problems else 0


def merge(args: argparse.Namespace) -> int:
    from squeez_ray.dataset.hand_merge import merge_labels

    summary = merge_labels(args.pool, _label_files(args.labels), args.out, strict=not args.skip_bad, seed=args.seed)
    print(json.dumps(summary, indent=2))
    return 1 if summary.get("problems") and not args.skip_bad else 0


def report(args: argparse.Namespace) -> int:
    """Agreement (blind pass B vs pass A, rule teacher vs hand) and the datasheet, from the stored set."""
    from squeez_ray.label.hand.agreement import blind_agreement, rule_agreement
    from squeez_ray.dataset.datasheet import load_built, render_datasheet
    from squeez_ray.label.hand.labels import check_label_files
    from squeez_ray.collect.pool import read_pool
    from squeez_ray.io_utils import write_json_atomic, write_text_atomic

    data = Path(args.data)
    pool = read_pool(data / "outputs.parquet")
    good, _ = check_label_files(_label_files([str(data / "labels")]), pool)
    agreement, rule = blind_agreement(good, pool), rule_agreement(good, pool)
    write_json_atomic(data / "agreement.json", {"blind": agreement, "rule_teacher": rule})
    write_text_atomic(data / "DATASHEET.md", render_datasheet(load_built(data), pool, agreement, rule))
    print(json.dumps({"blind": {k: v for k, v in agreement.items() if k != "by_family"},
                      "rule_teacher_line_f1": rule["line_f1"]}, indent=2))
    print(f"wrote {data / 'agreement.json'} and {data / 'DATASHEET.md'}")
    return 0


def export(args: argparse.Namespace) -> int:
    """The splits as released-Squeez prompt/response rows (what jobs/train.py and other SFT tools read)."""
    from squeez_ray.schema import read_examples, write_examples

    for split in ("train", "dev", "test"):
        rows = read_examples(Path(args.data) / f"{split}.parquet")
        count = write_examples(rows, Path(args.out) / f"{split}.jsonl", format="squeez")
        print(f"{split}: {count} rows -> {Path(args.out) / f'{split}.jsonl'}")
    return 0


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
    p.set_defaults(run=render)
    p = commands.add_parser("check", help="validate label files against the pool")
    p.add_argument("files", nargs="+", help="label files (JSONL) or folders of them")
    p.add_argument("--pool", nargs="+", required=True)
    p.set_defaults(run=check)
    p = commands.add_parser("merge", help="validate all label files and build the dataset")
    p.add_argument("--pool", nargs="+", required=True)
    p.add_argument("--labels", nargs="+", required=True, help="label files or folders")
    p.add_argument("--out", required=True, help="dataset folder (data/handlabel)")
    p.add_argument("--skip-bad", action="store_true", help="merge the good rows even when some rows have problems")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=merge)
    p = commands.add_parser("report", help="agreement figures and the datasheet of a merged set")
    p.add_argument("--data", default="data/handlabel", help="the merged set (outputs.parquet, labels/, splits)")
    p.set_defaults(run=report)
    p = commands.add_parser("export", help="write the splits as released-Squeez prompt/response JSONL")
    p.add_argument("--data", default="data/handlabel")
    p.add_argument("--out", required=True)
    p.set_defaults(run=export)
    return run_job("hand_label", lambda args: Outcome(exit_code=args.run(args)), argv, parser=parser,
                   errors=(FileNotFoundError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
