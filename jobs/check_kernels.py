"""Check that the fast Qwen 3.5 kernels (flash-linear-attention, causal-conv1d) import and run a tiny op.

    python jobs/check_kernels.py [--require]     # exit 1 with --require when one is missing or broken

Run on GPU nodes after set-up (cluster.yaml does): without them training silently takes transformers'
slow PyTorch fallback. A node without CUDA has nothing to check and exits 0.
"""

from __future__ import annotations

import sys

from squeez_ray.train.kernels import main

if __name__ == "__main__":
    sys.exit(main())
