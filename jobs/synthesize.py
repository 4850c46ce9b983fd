"""Write synthetic multi-ecosystem tool outputs with a teacher LLM, then label them like real ones.

    python jobs/synthesize.py --config jobs/configs/synthesize.yaml output_dir=data/synthetic \\
        teacher.http.url=http://HOST:8000/v1
    ray job submit --working-dir . -- python jobs/synthesize.py --config jobs/configs/synthesize.yaml ...

Families live in jobs/configs/synth_families.yaml. Rerunning resumes (written ids are skipped).
"""

from __future__ import annotations

import sys

from squeez_ray.dataset.synthesize import SynthesizeConfig, synthesize
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: SynthesizeConfig, args) -> Outcome:
    manifest = synthesize(config)
    return Outcome(summary={"counts": manifest["counts"], "dropped": manifest["dropped"]},
                   notes=[f"labelled parts: {config.output_dir}/labelled/"],
                   manifest=f"{config.output_dir}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, SynthesizeConfig, config_help="YAML config (jobs/configs/synthesize.yaml)",
                        overrides_example="per_family=5")
    return run_job("synthesize", work, argv, parser=parser, config_cls=SynthesizeConfig)


if __name__ == "__main__":
    sys.exit(main())
