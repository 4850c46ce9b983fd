"""Evaluate pruners on a labelled set: ``python jobs/evaluate.py --data FILE --system bm25 --out DIR``.

The same flags as ``squeez eval`` (see ``--help``); runs on this machine without Ray. With
``--ray`` the same evaluation runs on Ray Data, one actor pool per system (``--ray --help`` for the
actor-pool flags; see docs/BULK.md); scores and reports are identical.
"""

import sys

from squeez_ray.evaluate.cli_eval import main

if __name__ == "__main__":
    if "--ray" in sys.argv[1:]:
        from squeez_ray.evaluate.bulk import main as bulk_main

        sys.exit(bulk_main([a for a in sys.argv[1:] if a != "--ray"]))
    sys.exit(main(prog="jobs/evaluate.py"))
