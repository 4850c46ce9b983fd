"""jobs/merge.py RUN_DIR merges the best checkpoint by the score the run ranked them by, not the latest."""

from __future__ import annotations

import json

import pytest

from squeez_ray.train.loop import METADATA_FILE
from squeez_ray.train.merge import MergeError, find_checkpoint, pick_checkpoint

pytestmark = pytest.mark.unit


def _run(tmp_path, scores, score_key="eval_f1", order="max"):
    run = tmp_path / "run"
    for step, score in scores.items():
        folder = run / f"checkpoint_{step:06d}"
        folder.mkdir(parents=True)
        metrics = {} if score is None else {score_key: score, "eval_recall": 0.5}
        (folder / METADATA_FILE).write_text(json.dumps({"global_step": step, "metrics": metrics, "config": {
            "run": {"checkpoint_score": score_key, "checkpoint_score_order": order}}}))
    return run


def test_best_is_the_highest_recorded_eval_f1_and_latest_is_the_last_step(tmp_path):
    run = _run(tmp_path, {100: 0.41, 200: 0.57, 300: 0.49})
    assert find_checkpoint(run, "best").name == "checkpoint_000200"
    assert find_checkpoint(run, "latest").name == "checkpoint_000300"
    assert pick_checkpoint(run, None) == (run / "checkpoint_000200", "best by its recorded score")
    assert pick_checkpoint(run, str(run / "checkpoint_000100"))[0] == run / "checkpoint_000100"


def test_best_follows_the_runs_score_and_order(tmp_path):
    run = _run(tmp_path, {1: 2.0, 2: 1.5, 3: 1.7}, score_key="eval_loss", order="min")
    assert find_checkpoint(run, "best").name == "checkpoint_000002"


def test_without_recorded_scores_default_is_latest_and_best_is_a_clear_error(tmp_path):
    run = _run(tmp_path, {1: None, 2: None})
    assert pick_checkpoint(run, None) == (run / "checkpoint_000002", "latest (no checkpoint records a score)")
    with pytest.raises(MergeError, match="records eval_f1.*--checkpoint latest"):
        find_checkpoint(run, "best")
    with pytest.raises(MergeError, match="latest, best"):
        find_checkpoint(run, "newest")
