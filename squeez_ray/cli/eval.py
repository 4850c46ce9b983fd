"""``squeez eval`` / ``python jobs/evaluate.py``: score pruners on a labelled set.

    squeez eval --data ../shared/eval/public_cases.jsonl --system bm25 --system first --out runs/eval
    squeez eval --data test.parquet --system vllm=squeez-2b --model ckpt/merged --out runs/eval-2b
    squeez eval --ray --workers 4 --data test.parquet --system server=squeez-2b --server-url URL --out runs/eval

Settings may also come from ``--config YAML`` (keys named after the flags) and ``key=value`` words.
On one machine by default; with ``--ray`` the same evaluation runs on Ray Data, one actor pool per
system (``evaluate/bulk.py``), with identical scores and reports.
Prints the paper-style table overall and per tool family, and writes metrics.json,
per_example.parquet, report.md, recall_vs_compression.png and manifest.json into ``--out``.
Bad input data or an unknown backend prints one error line and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import sys

from squeez_ray.infer.registry import BACKENDS, BASELINES, BackendError, add_backend_arguments, backend_options_from_args
from squeez_ray.runner import add_config_arguments, add_worker_arguments, parse_flags, positive_int

DEFAULT_SYSTEMS = BASELINES


def build_parser(prog: str = "squeez eval") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data",
                        help="(required) labelled examples: .jsonl / .parquet (canonical, cases or Squeez prompt/response rows), "
                             "a datasets save_to_disk folder, a folder of Parquet files, or a Hub id owner/name")
    parser.add_argument("--split", help="split to use when --data holds several (datasets folders, Hub ids)")
    parser.add_argument("--system", action="append", metavar="NAME[=LABEL[@MODEL]]",
                        help=f"backend to evaluate, repeatable; one of: {', '.join(BACKENDS)}; "
                             "@MODEL after the label gives that system its own checkpoint; "
                             f"=LABEL names it in the tables (default: {' '.join(DEFAULT_SYSTEMS)})")
    parser.add_argument("--out", help="(required) output folder")
    parser.add_argument("--limit", type=positive_int, help="evaluate only the first N examples")
    parser.add_argument("--no-resume", dest="resume", action="store_false",
                        help="re-run every system even if its rows from an identical earlier run are in --out")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    add_backend_arguments(parser)
    group = parser.add_argument_group("Ray Data options (with --ray)")
    group.add_argument("--ray", action="store_true",
                       help="run on Ray Data: one actor pool per system (joins RAY_ADDRESS, else a local Ray)")
    add_worker_arguments(group, ("--examples-per-batch", 16, "examples per actor call; each call's rows are saved at once"))
    add_config_arguments(parser, required=["data", "out"])
    return parser


def main(argv: list[str] | None = None, prog: str = "squeez eval") -> int:
    from squeez_ray.evaluate.report import console_report
    from squeez_ray.schema import DataError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_flags(build_parser(prog), argv)
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:  # bm25s sets its own logger to DEBUG; filter at the handler
        handler.setLevel(level)
    try:
        metrics = _evaluate(args, argv)
    except (DataError, BackendError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    print(console_report(metrics))
    print(f"\nwrote {args.out}/metrics.json, per_example.parquet, report.md, recall_vs_compression.png")
    return 0


def _evaluate(args: argparse.Namespace, argv: list[str]) -> dict:
    from squeez_ray.evaluate.local import SystemSpec, evaluate_to_dir

    systems = [SystemSpec.parse(s) for s in (args.system or DEFAULT_SYSTEMS)]
    unknown = [s.backend for s in systems if s.backend not in BACKENDS]
    if unknown:
        raise BackendError(f"unknown system {', '.join(map(repr, unknown))}; choose from: {', '.join(BACKENDS)}")
    common = dict(options=backend_options_from_args(args), limit=args.limit, split=args.split, resume=args.resume,
                  argv=argv)
    if not args.ray:
        return evaluate_to_dir(args.data, systems, args.out, **common)
    from squeez_ray.evaluate.bulk import BulkSettings, evaluate_bulk

    bulk = BulkSettings(workers=args.workers, batch_size=args.examples_per_batch,
                        cpus_per_worker=args.cpus_per_worker, gpus_per_worker=args.gpus_per_worker)
    return evaluate_bulk(args.data, systems, args.out, bulk=bulk, **common)
