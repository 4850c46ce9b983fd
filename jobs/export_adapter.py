"""Export a training checkpoint's LoRA adapter as a small folder to ship or to train on from.

    python jobs/export_adapter.py runs/gemma270m-lora-cpu --out adapters/gemma270m-squeez-lora

Keeps the adapter weights (bfloat16 by default: half the size), its config and squeez_train.json with
the base named portably (the checkpoint's model.base, e.g. gemma-3-270m); drops the optimizer,
scheduler and RNG state. The result is what jobs/merge.py merges and model.init_adapter trains on.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.adapter_export import export_adapter

    meta = export_adapter(args.checkpoint, args.out, base_name=args.base_name, dtype=args.dtype,
                          overwrite=args.overwrite)
    return Outcome(summary={"adapter": args.out, "from": meta["exported_from"], "base_model": meta["base_model"],
                            "global_step": meta.get("global_step"), "dtype": args.dtype})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="training checkpoint folder, or a run folder (its latest checkpoint)")
    parser.add_argument("--out", required=True, help="folder to write (atomically)")
    parser.add_argument("--base-name", help="how the export names its base (default: the checkpoint's model.base)")
    parser.add_argument("--dtype", default="bfloat16", help="adapter weights' dtype (bfloat16, float16, float32)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists (its *.md files stay)")
    return run_job("export_adapter", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
