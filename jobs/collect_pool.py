"""Collect real tool outputs into a hand-label pool (docs/HANDLABEL.md, step 1).

    python jobs/collect_pool.py python --cache runs/encoder_data_cache --repo . --out runs/handlabel/pool/python.jsonl
    python jobs/collect_pool.py ecosystems --out runs/handlabel/pool/ecosystems.jsonl

``python``: package observations, long outputs and a repository's git history
(``squeez_ray/collect/sources/python_pool.py``); ``ecosystems``: npm, C, Rust and service-log recipes
(``squeez_ray/collect/sources/ecosystems.py``). ``python jobs/collect_pool.py SOURCE --help`` lists
each one's flags.
"""

import sys

SOURCES = ("python", "ecosystems")


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in SOURCES:
        print(f"usage: python jobs/collect_pool.py {{{','.join(SOURCES)}}} [FLAGS | --help]", file=sys.stderr)
        return 2
    if argv[0] == "python":
        from squeez_ray.collect.sources.python_pool import main as collect
    else:
        from squeez_ray.collect.sources.ecosystems import main as collect
    return collect(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
