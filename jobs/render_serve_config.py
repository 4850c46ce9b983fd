"""Write a checked copy of a Serve config with its application args overridden, for `serve deploy`.

    python jobs/render_serve_config.py serve_configs/pruner_gpu.yaml model=/mnt/shared/models/squeez-2b \
        accelerator_type=H100 --out deploy.yaml && serve deploy deploy.yaml

`serve deploy` builds the app on the cluster, where the client's SQUEEZ_SERVE_MODEL is never seen:
the model path and the GPU type belong in the config itself (squeez_ray.serve.render).
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.serve.render import render_to

    text = render_to(args.config, args.overrides, args.app, args.out)
    if args.out:
        print(f"render: wrote {args.out}; deploy it with: serve deploy {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.serve.render import __doc__ as doc

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a Serve config (serve_configs/*.yaml)")
    parser.add_argument("overrides", nargs="*", help="key=value under the application's args")
    parser.add_argument("--app", help="application name (when the config holds several)")
    parser.add_argument("--out", help="file to write (default: standard output)")
    return run_job("render", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
