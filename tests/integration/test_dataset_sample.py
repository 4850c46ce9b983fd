"""sample_data end to end: `python jobs/sample_data.py --out DIR` on this machine's local sources only
(real pytest / python / ruff / pip / git / grep runs, rule teacher), read back the way training reads it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sample_data_builds_a_real_dataset_training_reads(tmp_path):
    out = tmp_path / "sample"
    done = subprocess.run([sys.executable, "jobs/sample_data.py", "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())

    from squeez_ray.schema import read_examples
    from squeez_ray.train.data import load_rows, training_row

    splits = {s: read_examples(out / f"{s}.parquet") for s in ("train", "dev", "test")}
    total = sum(len(rows) for rows in splits.values())
    assert total >= 200, manifest["counts"]
    assert all(splits.values())
    everything = [r for rows in splits.values() for r in rows]
    tools = Counter(r["tool_type"] for r in everything if not r["is_irrelevant"])
    assert {"read_file", "grep", "test_output", "python", "git_log", "lint_output"} <= set(tools), tools
    negatives = [r for r in everything if r["is_irrelevant"]]
    assert negatives and all(r["gold_spans"] == [] and r["source"] == "synthetic_negative" for r in negatives)
    # disjoint by repository
    repos = {s: {r["repo"] for r in rows} for s, rows in splits.items()}
    assert not (repos["train"] & repos["dev"] or repos["train"] & repos["test"] or repos["dev"] & repos["test"])
    # QA held: every positive keeps at most half of its output, every output has >= 5 lines
    for row in everything:
        n = len(row["tool_output"].split("\n"))
        kept = sum(s["end_line"] - s["start_line"] + 1 for s in row["gold_spans"])
        assert n >= 5 and kept * 2 <= n
    # the folder is what the training job reads (train_path=DIR, train_split=train)
    train = load_rows(str(out), "train", what="train")
    assert len(train) == len(splits["train"])
    assert all(training_row(r)["target"].startswith("<relevant_lines>") for r in train)
    failing = next(r for r in everything if r["tool_type"] == "test_output" and not r["is_irrelevant"])
    assert "fail" in failing["query"].lower()
    assert manifest["label_dropped"] and manifest["dropped"] is not None
    assert (out / "stats.md").read_text().count("|") > 20

    # a second run with the same folder does nothing (resume), unless --overwrite
    again = subprocess.run([sys.executable, "jobs/sample_data.py", "--out", str(out)], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and json.loads((out / "manifest.json").read_text()) == manifest
