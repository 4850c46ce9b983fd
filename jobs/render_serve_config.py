"""Write a checked copy of a Serve config with its application args overridden, for `serve deploy`.

    python jobs/render_serve_config.py serve_configs/pruner_gpu.yaml model=/mnt/shared/models/squeez-2b \
        accelerator_type=H100 --out deploy.yaml && serve deploy deploy.yaml

`serve deploy` builds the app on the cluster, where the client's SQUEEZ_SERVE_MODEL is never seen:
the model path and the GPU type belong in the config itself (squeez_ray.serve.render).
"""

from __future__ import annotations

import sys

from squeez_ray.serve.render import main

if __name__ == "__main__":
    sys.exit(main())
