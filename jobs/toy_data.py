"""The toy collection input (a git repository with history, its bare mirror, an instances file):
``python jobs/toy_data.py OUT_DIR`` (docs/DATA.md); OUT_DIR must not exist."""

import sys

from squeez_ray.collect.toy import build_toy_dataset

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python jobs/toy_data.py OUT_DIR (must not exist)")
    for name, path in build_toy_dataset(sys.argv[1]).items():
        print(f"{name}: {path}")
