"""The hand-labelling steps behind ``jobs/hand_label.py`` (docs/HANDLABEL.md): batches of pool outputs for a
labeller, label-file checks, the merge into a dataset, agreement and datasheet, released-Squeez export.

Each step prints what it did and returns the job's exit code (0 ok, 1 label problems found).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _label_files(paths: list[str]) -> list[Path]:
    from squeez_ray.label.hand.labels import label_files

    return label_files(paths)


def render(pool_paths: list[str], out: str, labels: list[str] | None = None, family: list[str] | None = None,
           exclude: list[str] | None = None, batch_outputs: int = 40, batch_lines: int = 8000, limit: int | None = None,
           blind: int | None = None, second: bool = False, seed: int = 0) -> int:
    """Write batches of pool outputs not labelled yet (or a blind / second sample of labelled ones)."""
    from squeez_ray.label.hand.batches import blind_sample, plan_batches, write_batches
    from squeez_ray.label.hand.labels import read_label_rows
    from squeez_ray.collect.pool import read_pool

    pool = read_pool(pool_paths)
    labelled = [raw for f in _label_files(labels or []) if f.exists() for _, raw in read_label_rows(f)[0]]
    done = {raw.get("output_id") for raw in labelled}
    for batch in exclude or []:  # batches handed out but not labelled yet
        done.update(json.loads(Path(batch).read_text())["output_ids"])
    queries = None
    if blind:  # a blind second labelling of pass-A examples: their outputs with the queries, no gold
        queries = blind_sample(labelled, pool, blind, seed=seed)
        todo = [pool[i] for i in sorted(queries)]
    elif second:  # outputs labelled once (of --family): a second, different example of each
        asked: dict[str, list[str]] = {}
        for raw in labelled:
            if raw.get("pass") == "A":
                asked.setdefault(raw["output_id"], []).append(raw["query"])
        queries = {i: q for i, q in asked.items() if len(q) == 1 and i in pool
                   and (not family or pool[i]["family"] in family)}
        todo = [pool[i] for i in sorted(queries)]
    else:
        todo = [r for r in pool.values() if r["output_id"] not in done
                and (not family or r["family"] in family)]
    folder = Path(out)
    prefix = "blind" if blind else "second" if second else "batch"
    first = 1 + len(list(folder.glob(f"{prefix}-*.txt"))) if folder.exists() else 1
    batches = plan_batches(todo, max_outputs=batch_outputs, max_lines=batch_lines, seed=seed)
    written = write_batches(batches[:limit] if limit else batches, folder, first=first, queries=queries,
                            prefix=prefix, second=bool(second))
    print(f"{len(pool)} outputs in the pool, {len(done)} already labelled, {len(todo)} to label: "
          f"{len(written)} batches in {folder}")
    return 0


def check(paths: list[str], pool_paths: list[str]) -> int:
    """Print each problem of the label files (and a count); 1 when there are any."""
    from squeez_ray.label.hand.labels import REVISION_PASSES, check_label_files, read_label_rows
    from squeez_ray.collect.pool import read_pool

    files = _label_files(paths)
    # a revision file (widen-001.W.jsonl) is checked against the pass-A rows of the label files beside it
    folders = {str(f.parent) for f in files if f.name.endswith(tuple(f".{p}.jsonl" for p in REVISION_PASSES))}
    reference = [raw for f in _label_files(sorted(folders)) if f not in files for _, raw in read_label_rows(f)[0]]
    good, problems = check_label_files(files, read_pool(pool_paths), reference=reference)
    for problem in problems:
        print(problem)
    print(f"{len(good)} good label rows, {len(problems)} problems in {len(files)} files")
    return 1 if problems else 0


def merge(pool_paths: list[str], labels: list[str], out: str, skip_bad: bool = False, seed: int = 0,
          place: list[str] | None = None) -> int:
    """Validate every label file and build the dataset; 1 when rows had problems (and not ``skip_bad``),
    2 on a bad ``--place`` (SOURCE=SPLIT: a new source's split, chosen before labelling)."""
    from squeez_ray.dataset.hand_merge import merge_labels

    try:
        placements = {}
        for item in place or []:
            source, sep, split = item.partition("=")
            if not (sep and source and split):
                raise ValueError(f"--place {item!r}: expected SOURCE=SPLIT, e.g. logs:vllm=dev")
            placements[source] = split
        summary = merge_labels(pool_paths, _label_files(labels), out, strict=not skip_bad, seed=seed, place=placements)
    except ValueError as error:  # a malformed or refused --place: one line, nothing written
        print(f"merge: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 1 if summary.get("problems") and not skip_bad else 0


def report(data_dir: str) -> int:
    """Agreement (blind pass B vs pass A, rule teacher vs hand) and the datasheet, from the stored set."""
    from squeez_ray.label.hand.agreement import blind_agreement, rule_agreement
    from squeez_ray.dataset.datasheet import load_built, render_datasheet
    from squeez_ray.label.hand.labels import check_label_files
    from squeez_ray.collect.pool import read_pool
    from squeez_ray.io_utils import write_json_atomic, write_text_atomic

    data = Path(data_dir)
    pool = read_pool(data / "outputs.parquet")
    good, _ = check_label_files(_label_files([str(data / "labels")]), pool)
    agreement, rule = blind_agreement(good, pool), rule_agreement(good, pool)
    write_json_atomic(data / "agreement.json", {"blind": agreement, "rule_teacher": rule})
    write_text_atomic(data / "DATASHEET.md", render_datasheet(load_built(data), pool, agreement, rule))
    print(json.dumps({"blind": {k: v for k, v in agreement.items() if k != "by_family"},
                      "rule_teacher_line_f1": rule["line_f1"]}, indent=2))
    print(f"wrote {data / 'agreement.json'} and {data / 'DATASHEET.md'}")
    return 0


def export(data_dir: str, out: str) -> int:
    """The splits as released-Squeez prompt/response rows (what jobs/train.py and other SFT tools read)."""
    from squeez_ray.schema import read_examples, write_examples

    for split in ("train", "dev", "test"):
        rows = read_examples(Path(data_dir) / f"{split}.parquet")
        count = write_examples(rows, Path(out) / f"{split}.jsonl", format="squeez")
        print(f"{split}: {count} rows -> {Path(out) / f'{split}.jsonl'}")
    return 0
