"""Evaluate pruners on a labelled set: ``python jobs/evaluate.py --data FILE --system bm25 --out DIR``.

The same flags as ``squeez eval`` (see ``--help``); runs on this machine without Ray. With
``--ray`` the same evaluation runs on Ray Data, one actor pool per system (see docs/BULK.md);
scores and reports are identical.
"""

import sys

from squeez_ray.cli.eval import main

if __name__ == "__main__":
    sys.exit(main(prog="jobs/evaluate.py"))
