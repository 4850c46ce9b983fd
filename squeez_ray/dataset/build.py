"""Build train / dev / test Parquet from labelled examples: QA, group splits, negatives, statistics.

Plain Python over the rows rather than Ray Data: a labelled set is thousands to a few hundred
thousand rows, the split needs a global view of group sizes, and the result must be identical on
every run; the expensive work (collection, labelling) already ran on Ray.

Output folder: ``train.parquet``, ``dev.parquet``, ``test.parquet`` (the project schema, read by
``squeez_ray.schema.read_examples`` and the training job), ``manifest.json`` (resolved config, git
revision, inputs, counts, drops by reason), ``stats.json`` and ``stats.md`` (per family).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.config import to_dict
from squeez_ray.dataset import qa, stats
from squeez_ray.dataset.negatives import make_negatives, negatives_needed
from squeez_ray.dataset.splits import SPLITS, assign_splits, check_ratios, group_of
from squeez_ray.io_utils import git_revision, write_json_atomic, write_text_atomic

log = logging.getLogger(__name__)


@dataclass
class BuildConfig:
    inputs: list[str] = field(default_factory=list)  # labelled Parquet / JSONL files or folders of Parquet
    output_dir: str = "data/dataset"  # train/dev/test Parquet, manifest.json and stats.md go here
    # group share per split
    ratios: dict[str, float] = field(default_factory=lambda: {"train": 0.8, "dev": 0.1, "test": 0.1})
    seed: int = 0  # seeds the group split and the negatives
    negatives_share: float = 0.1  # share of each split made of explicit negatives (added ones count)
    qa: qa.QAConfig = field(default_factory=qa.QAConfig)
    overwrite: bool = False  # rebuild even when the manifest says the same inputs were built

    def validate(self) -> list[str]:
        problems = check_ratios(self.ratios)
        if not 0 <= self.negatives_share < 1:
            problems.append(f"negatives_share: must be in [0, 1), got {self.negatives_share}")
        return problems


def _fingerprint(paths: Sequence[str], config: BuildConfig) -> str:
    digest = hashlib.sha256(json.dumps({k: v for k, v in to_dict(config).items() if k != "overwrite"},
                                       sort_keys=True).encode())
    for path in paths:
        for file in sorted(Path(path).rglob("*")) if Path(path).is_dir() else [Path(path)]:
            if file.is_file():
                st = file.stat()
                digest.update(f"{file}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def build_dataset(config: BuildConfig) -> dict[str, Any]:
    """Read ``config.inputs`` and build the dataset; skips the work when the manifest is current."""
    from squeez_ray.schema import DataError, read_examples

    if not config.inputs:
        raise DataError("no inputs: give at least one labelled Parquet/JSONL file or folder (inputs=[...])")
    out = Path(config.output_dir)
    fingerprint = _fingerprint(config.inputs, config)
    manifest_path = out / "manifest.json"
    if manifest_path.exists() and not config.overwrite:
        previous = json.loads(manifest_path.read_text())
        if previous.get("fingerprint") == fingerprint and all((out / f"{s}.parquet").exists() for s in SPLITS):
            log.info("%s is up to date with its inputs; nothing to do (overwrite=true rebuilds)", out)
            return previous
    examples: list[dict[str, Any]] = []
    for path in config.inputs:
        if not Path(path).exists():
            raise DataError("input does not exist", path=path)
        examples.extend(read_examples(path))
    return build_from_examples(examples, config, inputs=list(config.inputs), fingerprint=fingerprint)


def previous_splits(manifest_path: str | Path) -> dict[str, str]:
    """group -> split recorded by an earlier build's manifest.json ({} when there is none)."""
    path = Path(manifest_path)
    if not path.is_file():
        return {}
    groups = json.loads(path.read_text()).get("counts", {}).get("groups", {})
    return {group: split for split, names in groups.items() for group in names}


def unique_instance_ids(examples: Sequence[dict[str, Any]]) -> int:
    """Give every example its own ``instance_id``; returns how many were renamed.

    An instance (one repository task) yields several tool runs, and the teachers label each run as
    an example under the instance's id. Evaluation, per-example results and resume are keyed by the
    id, so examples sharing one become ``<id>#<k>`` (k in input order, as the file teacher names two
    queries over one output), which keeps the instance readable in the id and the build repeatable.
    """
    counts = Counter(str(e["instance_id"]) for e in examples)
    taken = set(counts)
    seen: Counter = Counter()
    renamed = 0
    for example in examples:
        ident = str(example["instance_id"])
        if counts[ident] < 2:
            continue
        k = seen[ident]
        while f"{ident}#{k}" in taken:  # never collide with an id that already has this shape
            k += 1
        seen[ident] = k + 1
        example["instance_id"] = f"{ident}#{k}"
        taken.add(example["instance_id"])
        renamed += 1
    return renamed


def build_from_examples(examples: Sequence[Mapping[str, Any]], config: BuildConfig, *, inputs: list[str] | None = None,
                        fingerprint: str | None = None, extra_manifest: Mapping[str, Any] | None = None,
                        pinned_splits: Mapping[str, str] | None = None) -> dict[str, Any]:
    """QA -> split by group -> negatives per split -> QA on negatives -> write; returns the manifest.

    ``pinned_splits`` (group -> split, e.g. ``previous_splits(manifest)``) keeps known groups in place."""
    from squeez_ray.schema import write_examples

    started = time.time()
    kept, dropped = qa.filter_examples(examples, config.qa)
    for example in kept:
        example["split_group_id"] = group_of(example)
    unique_instance_ids(kept)  # after grouping: an instance's examples stay in one split
    sizes = Counter(e["split_group_id"] for e in kept)
    split_of = assign_splits(sizes, config.ratios, config.seed, pinned=pinned_splits) if sizes else {}
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for example in kept:
        example["split"] = split_of[example["split_group_id"]]
        by_split[example["split"]].append(example)

    added = Counter()
    negative_drops: Counter = Counter()
    for index, split in enumerate(SPLITS):
        rows = by_split[split]
        positives = sum(not e["is_irrelevant"] for e in rows)
        want = negatives_needed(positives, config.negatives_share) - sum(e["is_irrelevant"] for e in rows)
        fresh = make_negatives(rows, want, seed=config.seed * 1000 + index)
        fresh, dropped_here = qa.filter_examples(fresh, config.qa)
        negative_drops += dropped_here
        for example in fresh:
            example["split"] = split
        rows.extend(fresh)
        added[split] = len(fresh)

    out = Path(config.output_dir)
    counts = {}
    for split in SPLITS:
        counts[split] = write_examples(by_split[split], out / f"{split}.parquet")
    everything = [e for split in SPLITS for e in by_split[split]]
    table = stats.family_table(everything)
    write_json_atomic(out / "stats.json", table)
    write_text_atomic(out / "stats.md", stats.to_markdown(table))
    manifest = {
        "job": "build_dataset",
        "config": to_dict(config),
        "git_revision": git_revision(),
        "inputs": inputs or [],
        "fingerprint": fingerprint,
        "counts": {"input_examples": len(examples), "after_qa": len(kept), **counts,
                   "negatives_added": dict(added), "groups": {s: sorted(g for g, v in split_of.items() if v == s)
                                                              for s in SPLITS}},
        "dropped": dict(dropped),
        "negatives_dropped": dict(negative_drops),
        "seconds": round(time.time() - started, 2),
        **(dict(extra_manifest) if extra_manifest else {}),
    }
    write_json_atomic(out / "manifest.json", manifest)
    log.info("built %s: %s (dropped %s)", out, counts, dict(dropped))
    return manifest
