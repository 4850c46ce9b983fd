"""Collect real tool outputs into a hand-label pool (docs/HANDLABEL.md, step 1).

    python jobs/collect_pool.py python --cache runs/encoder_data_cache --repo . --out runs/handlabel/pool/python.jsonl
    python jobs/collect_pool.py ecosystems --out runs/handlabel/pool/ecosystems.jsonl

``python``: package observations, long outputs and a repository's git history
(``squeez_ray/collect/sources/python_pool.py``); ``ecosystems``: npm, C, Rust and service-log recipes
(``squeez_ray/collect/sources/ecosystems.py``). ``python jobs/collect_pool.py SOURCE --help`` lists
each one's flags.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def python(args: argparse.Namespace) -> Outcome:
    from squeez_ray.collect.sources.python_pool import write_pool

    count = write_pool(args.cache, args.out, args.repo, args.repo_source, args.repo_licence, args.seed)
    return Outcome(notes=[f"{count} pool rows -> {args.out}"])


def ecosystems(args: argparse.Namespace) -> Outcome:
    from squeez_ray.collect.sources.ecosystems import collect_ecosystems

    count, path = collect_ecosystems(args.out, args.only, args.redo)
    return Outcome(notes=[f"wrote {count} rows to {path}"])


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.collect.sources import ecosystems as ecosystems_module
    from squeez_ray.collect.sources import python_pool as python_module

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sources = parser.add_subparsers(dest="source", required=True)
    p = sources.add_parser("python", help="package observations, long outputs, a repository's git history",
                           description=python_module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", required=True, help="cache_dir of jobs/build_encoder_data.py")
    p.add_argument("--repo", help="a git repository whose real history to add (e.g. this checkout)")
    p.add_argument("--repo-source", default="repo:squeez-ray")
    p.add_argument("--repo-licence", default="the repository's own licence")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=python)
    p = sources.add_parser("ecosystems", help="npm, C, Rust, Java and service-log recipes",
                           description=ecosystems_module.__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/handlabel/pool/ecosystems.jsonl")
    p.add_argument("--only", nargs="*", help="recipe names (default: all)")
    p.add_argument("--redo", action="store_true", help="rerun recipes even when cached")
    p.set_defaults(run=ecosystems)
    return run_job("collect_pool", lambda args: args.run(args), argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
