"""Merge hand-label files into the dataset, through the same pipeline as teacher-labelled data.

1. every label file is checked against the pool (``labels.check_label_files``); with ``strict`` any
   problem stops the merge before anything is written;
2. the labelled outputs are frozen in ``OUT/outputs.parquet`` (pool schema, zstd): with the label
   files this is the dataset's source of truth, so a fresh clone rebuilds it without the pool;
3. ``jobs/label.py``'s pipeline runs with the file teacher (pass A labels become examples; pass B is
   the blind second labelling, kept for agreement only);
4. ``build_from_examples`` QA's and splits by source (one package or repository = one group; a
   source keeps the split the previous ``OUT/manifest.json`` gave it) and writes ``OUT/{train,dev,test}.parquet``, ``stats.md`` and ``manifest.json``.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SOURCE = "hand"


def merge_labels(pool_paths: Sequence[str | Path] | str | Path, label_files: Sequence[str | Path], out: str | Path,
                 *, strict: bool = True, seed: int = 0, ray_address: str | None = None,
                 place: Mapping[str, str] | None = None) -> dict[str, Any]:
    from squeez_ray.dataset.build import BuildConfig, build_from_examples, previous_splits
    from squeez_ray.dataset.qa import QAConfig
    from squeez_ray.label.hand.labels import check_label_files
    from squeez_ray.collect.pool import read_pool, write_pool
    from squeez_ray.label.file_teacher import FileTeacherConfig
    from squeez_ray.label.job import LabelConfig, run_label
    from squeez_ray.label.pipeline import TeacherConfig
    from squeez_ray.schema import read_examples

    out = Path(out)
    # Sources keep the split an earlier merge gave them: growing the set never moves a source
    # from train into dev/test (or back), so earlier checkpoints stay comparable on dev and test.
    pinned = with_placements(previous_splits(out / "manifest.json"), place or {})
    pool = read_pool(pool_paths)
    good, problems = check_label_files(label_files, pool)
    summary: dict[str, Any] = {"label_rows_ok": len(good), "problems": [str(p) for p in problems[:50]],
                               "problem_count": len(problems)}
    if problems and strict:
        summary["written"] = False
        return summary
    used = sorted({row["output_id"] for row in good})
    unknown = sorted(s for s in (place or {}) if s.removeprefix("repo:") not in {pool[i]["source"] for i in used})
    if unknown:  # a misspelt source would otherwise be placed nowhere, silently
        raise ValueError(f"--place names sources no label row uses: {', '.join(unknown)}")
    write_pool([pool[i] for i in used], out / "outputs.parquet")
    files = sorted({str(Path(f)) for f in label_files})
    with tempfile.TemporaryDirectory(prefix="squeez-handlabel-") as tmp:
        label_config = LabelConfig(observations=str(out / "outputs.parquet"), output_dir=tmp, source=SOURCE,
                                   ray_address=ray_address,
                                   teacher=TeacherConfig(engine="file", max_output_lines=10**6,
                                                               file=FileTeacherConfig(labels=files)))
        label_manifest = run_label(label_config)
        examples, repeated = drop_repeated_examples(read_examples(Path(tmp) / "labelled"))
    build = BuildConfig(output_dir=str(out), seed=seed, negatives_share=0.0, overwrite=True,
                        qa=QAConfig(min_output_lines=5, max_relevant_share=0.5))
    manifest = build_from_examples(examples, build, inputs=files, pinned_splits=pinned,
                                   extra_manifest={"pool_outputs": len(pool), "labelled_outputs": len(used),
                                                   "repeated_examples_dropped": repeated,
                                                   "label_pipeline": label_manifest["counts"],
                                                   "label_drops": label_manifest["dropped"]})
    passes = Counter(str(row.get("pass")) for row in good)
    summary.update({"written": True, "outputs": len(used), "label_rows_by_pass": dict(passes),
                    "examples": {s: manifest["counts"][s] for s in ("train", "dev", "test")},
                    "dropped": manifest["dropped"], "out": str(out)})
    return summary


def with_placements(pinned: Mapping[str, str], place: Mapping[str, str]) -> dict[str, str]:
    """The manifest's pins plus new sources placed by hand (``--place logs:vllm=dev``).

    A split chosen before labelling (e.g. to give dev a family it lacks) is set here instead of left to
    the hash order of ``assign_splits``; a source an earlier merge already placed elsewhere is refused,
    since moving it would put examples a trained checkpoint saw into dev or test."""
    from squeez_ray.dataset.splits import SPLITS

    merged = dict(pinned)
    for source, split in place.items():
        group = source if source.startswith("repo:") else f"repo:{source}"
        if split not in SPLITS:
            raise ValueError(f"--place {source}={split}: the split must be one of {', '.join(SPLITS)}")
        if merged.get(group, split) != split:
            raise ValueError(f"--place {source}={split}: an earlier merge put {source} in {merged[group]}, "
                             f"and a source never moves between splits")
        merged[group] = split
    return merged


def drop_repeated_examples(examples: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The examples less those repeating an earlier one's query on the same output text; and how many.

    The same text can be collected twice under two ids (two commands printing one file, two greps with one
    answer), and a labeller who met it twice may ask it the same question: one example, counted twice in
    training and in dev/test scores. The first in input order is kept."""
    import hashlib

    kept, seen = [], set()
    for example in examples:
        key = (str(example["query"]).strip(), hashlib.sha1(str(example["tool_output"]).encode()).hexdigest())
        if key not in seen:
            seen.add(key)
            kept.append(example)
    return kept, len(examples) - len(kept)
