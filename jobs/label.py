"""Label raw tool observations with a teacher: a focused query, then the smallest evidence spans.

    python jobs/label.py --config jobs/configs/label.yaml observations=data/raw/observations \\
        instances=data/instances.jsonl output_dir=data/labelled teacher.http.url=http://HOST:8000/v1
    python jobs/label.py --config jobs/configs/label.yaml ... teacher.engine=rules      # no LLM
    ray job submit --working-dir . -- python jobs/label.py --config jobs/configs/label.yaml ...

The HTTP teacher's key comes from $SQUEEZ_TEACHER_API_KEY (teacher.http.api_key_env). Rerunning the
same command resumes; rows lost to the endpoint (budget, retries) are tried again.
"""

from __future__ import annotations

import sys

from squeez_ray.label.job import LabelConfig, run_label
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: LabelConfig, args) -> Outcome:
    manifest = run_label(config)
    return Outcome(summary={"counts": manifest["counts"], "dropped": manifest["dropped"]},
                   notes=[f"labelled parts: {config.output_dir}/labelled/"],
                   manifest=f"{config.output_dir}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, LabelConfig, config_help="YAML config (jobs/configs/label.yaml)",
                        overrides_example="teacher.engine=rules")
    return run_job("label", work, argv, parser=parser, config_cls=LabelConfig)


if __name__ == "__main__":
    sys.exit(main())
