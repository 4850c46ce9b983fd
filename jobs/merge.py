"""Merge a trained LoRA adapter into its base model, ready for vLLM, and check that vLLM loads it.

    python jobs/merge.py runs/tiny-cpu --out out/tiny-merged
    ray job submit --working-dir . -- python jobs/merge.py s3://bucket/runs/qwen35-2b-lora --out /mnt/models/squeez-2b

The first argument is a training checkpoint folder or a run folder. For a run folder, --checkpoint picks
which: best (the highest eval_f1, or the run's run.checkpoint_score, that the checkpoints record), latest,
or a checkpoint folder; without it, best when the checkpoints record a score, else latest.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, add_config_arguments, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.merge import merge_adapter, verify_with_vllm

    manifest = merge_adapter(args.checkpoint, args.out, overwrite=args.overwrite, base_override=args.base,
                             which=args.which)
    summary = {"merged": args.out, "adapter": manifest["adapter"], "chosen": manifest["adapter_chosen"],
               "adapter_metrics": manifest["adapter_metrics"], "base_model": manifest["base_model"],
               "prompt_format": manifest["prompt_format"]}
    if not args.skip_verify:
        summary["vllm_reply"] = verify_with_vllm(args.out, max_model_len=args.verify_max_model_len)
    return Outcome(summary=summary, manifest=f"{args.out}/manifest.json")  # the summary is the last line printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?", help="training checkpoint folder, or a run folder (see --checkpoint)")
    parser.add_argument("--checkpoint", dest="which", metavar="latest|best|PATH",
                        help="which checkpoint of a run folder (default: best by the recorded score, else latest)")
    parser.add_argument("--out", help="folder for the merged checkpoint (written atomically); required")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    parser.add_argument("--base", help="base model to merge into (default: the one the checkpoint records)")
    parser.add_argument("--skip-verify", action="store_true", help="do not load the result in vLLM")
    parser.add_argument("--verify-max-model-len", type=int, default=2048, help="context for the vLLM check")
    add_config_arguments(parser, required=["checkpoint", "out"])
    return run_job("merge", work, argv, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
