"""Re-prune stored agent runs (SWE-agent, mini-swe-agent, OpenHands v0/V1, Claude Code, Codex CLI)
into a new tree with the same files in the same formats, on Ray Data.

    python jobs/reprune.py --input RUNS --output PRUNED --backend bm25
    python jobs/reprune.py --config jobs/configs/reprune.yaml --input RUNS --output PRUNED
    ray job submit --working-dir . -- python jobs/reprune.py --input /shared/runs --output /shared/pruned \\
        --backend vllm --model /models/squeez-2b --workers 4

Rerun the same command after an interruption: finished files are skipped. See docs/BULK.md.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.infer.registry import BackendOptions, add_backend_arguments, backend_options_from_args
from squeez_ray.runner import (EXIT_FAILURES, EXIT_OK, Outcome, add_config_arguments, add_worker_arguments, parse_flags,
                               run_job)
from squeez_ray.trajectories.detect import ADAPTERS
from squeez_ray.trajectories.pipeline import RepruneConfig, run_reprune
from squeez_ray.trajectories.process import RepruneSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", help="directory of stored runs (never modified); required")
    parser.add_argument("--output", help="directory for the pruned tree, reports and manifest; required")
    parser.add_argument("--backend", default="bm25", help="pruner name from squeez_ray/infer/registry.py (default bm25)")
    parser.add_argument("--format", choices=sorted(ADAPTERS), help="force one format (default: detect per file)")
    parser.add_argument("--query-source", choices=["thought", "action", "task", "fixed"], default="thought",
                        help="thought: the agent's next reasoning (then the call's own, then the task); action: "
                             "its next call; task: the task statement; fixed: --query (default thought)")
    parser.add_argument("--query", help="fixed query (with --query-source fixed), and the fallback otherwise")
    parser.add_argument("--markers", action=argparse.BooleanOptionalAction, default=True,
                        help="write '... [N lines omitted]' where lines were cut (default on)")
    add_worker_arguments(parser, ("--files-per-batch", 4, "whole files per actor call; their observations share "
                                                         "engine batches"))
    parser.add_argument("--max-query-chars", type=int, default=2000, help="queries are cut to this length")
    add_backend_arguments(parser)  # includes --min-lines (default 10 here) and --batch-size (default 64 here)
    # --config: e.g. jobs/configs/reprune.yaml (engine_kwargs go to the engine)
    add_config_arguments(parser, extra_keys=["engine_kwargs"], required=["input", "output"])
    return parser


def config_from_args(args: argparse.Namespace) -> RepruneConfig:
    settings = RepruneSettings(
        input_dir=args.input, output_dir=args.output, format=args.format, query_source=args.query_source,
        query=args.query, min_lines=10 if args.min_lines is None else args.min_lines, markers=args.markers,
        batch_size=args.batch_size or 64, max_query_chars=args.max_query_chars)
    # min_lines is applied (and counted) by the job itself, so the pruner gets every output it is sent.
    options = backend_options_from_args(args, BackendOptions(engine_kwargs=getattr(args, "engine_kwargs", None) or {}))
    options.min_lines = 0
    return RepruneConfig(settings=settings, backend=args.backend, options=options, workers=args.workers,
                         files_per_batch=args.files_per_batch, cpus_per_worker=args.cpus_per_worker,
                         gpus_per_worker=args.gpus_per_worker)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Flags > key=value words > the --config file > the defaults."""
    return parse_flags(build_parser(), argv)


def work(args: argparse.Namespace) -> Outcome:
    summary = run_reprune(config_from_args(args))
    failed = summary["failed_files"] or summary["failed_observations"]
    notes = []
    if summary["failed_observations"]:  # one line on why, e.g. a server that was down (report.md has each)
        notes.append(f"{len(summary['failed_observations'])} observation(s) left unpruned, e.g. "
                     f"{summary['failed_observations'][-1]['error']}")
    return Outcome(exit_code=EXIT_FAILURES if failed else EXIT_OK, notes=notes, manifest=f"{args.output}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    return run_job("reprune", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
