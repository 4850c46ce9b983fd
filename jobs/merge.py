"""Merge a trained LoRA adapter into its base model, ready for vLLM, and check that vLLM loads it.

    python jobs/merge.py runs/tiny-cpu --out out/tiny-merged
    ray job submit --working-dir . -- python jobs/merge.py s3://bucket/runs/qwen35-2b-lora --out /mnt/models/squeez-2b

The first argument is a training checkpoint folder or a run folder (its latest checkpoint is used).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="training checkpoint folder, or a run folder (latest checkpoint)")
    parser.add_argument("--out", required=True, help="folder for the merged checkpoint (written atomically)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    parser.add_argument("--base", help="base model to merge into (default: the one the checkpoint records)")
    parser.add_argument("--skip-verify", action="store_true", help="do not load the result in vLLM")
    parser.add_argument("--verify-max-model-len", type=int, default=2048, help="context for the vLLM check")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.infer.prompt import PromptFormatError
    from squeez_ray.train.merge import MergeError, merge_adapter, verify_with_vllm

    try:
        manifest = merge_adapter(args.checkpoint, args.out, overwrite=args.overwrite, base_override=args.base)
    except (MergeError, PromptFormatError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = {"merged": args.out, "adapter": manifest["adapter"], "base_model": manifest["base_model"],
               "prompt_format": manifest["prompt_format"]}
    if not args.skip_verify:
        summary["vllm_reply"] = verify_with_vllm(args.out, max_model_len=args.verify_max_model_len)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
