"""``python -m squeez_ray.cli``: the ``squeez`` command without its console script."""

import sys

from squeez_ray.cli import main

if __name__ == "__main__":
    sys.exit(main())
