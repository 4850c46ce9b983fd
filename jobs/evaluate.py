"""Evaluate pruners on a labelled set: ``python jobs/evaluate.py --data FILE --system bm25 --out DIR``.

The same flags as ``squeez eval`` (see ``--help``); runs on this machine without Ray. With
``--ray`` the same evaluation runs on Ray Data, one actor pool per system (see docs/BULK.md);
scores and reports are identical.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.cli.eval import main as evaluate  # one command: `squeez eval` is the same parser and run

    return evaluate(argv, prog="jobs/evaluate.py")


if __name__ == "__main__":
    sys.exit(main())
