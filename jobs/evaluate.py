"""Evaluate pruners on a labelled set: ``python jobs/evaluate.py --data FILE --system bm25 --out DIR``.

The same flags as ``squeez eval`` (see ``--help``); runs on this machine without Ray.
"""

import sys

from squeez_ray.evaluate.cli_eval import main

if __name__ == "__main__":
    sys.exit(main(prog="jobs/evaluate.py"))
