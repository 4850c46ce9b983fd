"""A small synthetic labelled set for smoke training runs and tests:
``python jobs/synthetic_data.py data/synthetic/train.jsonl --n 64`` (see ``--help``)."""

import sys

from squeez_ray.train.synthetic import main

if __name__ == "__main__":
    sys.exit(main())
