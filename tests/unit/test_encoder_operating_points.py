"""The recall knob: the dev curve, picking a threshold from it, the kept-lines budget, and the runtime
honouring them per pruner and per request."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.encoder.operating_points import (
    cap_kept_lines,
    threshold_for_recall,
)
from squeez_ray.train.encoder.operating_curve import (
    operating_curve,
    recall_first_target,
)


def _examples():
    """Three outputs: gold lines score high but a few distractors score higher than some gold."""
    rng = np.random.default_rng(0)
    scores, labels = [], []
    for n, gold in ((40, [3, 4, 5, 30]), (60, [10, 11]), (30, [])):
        s = rng.uniform(0.0, 0.5, n)
        y = np.zeros(n)
        for i, g in enumerate(gold):
            s[g - 1] = 0.95 - 0.15 * i
            y[g - 1] = 1
        s[20] = 0.8  # a distractor above the weaker gold lines
        scores.append(s)
        labels.append(y)
    return scores, labels


def test_curve_trades_compression_for_recall_and_reaches_each_target():
    scores, labels = _examples()
    curve = operating_curve(scores, labels, bridge_gap=0)
    assert [p["target_recall"] for p in curve] == sorted(p["target_recall"] for p in curve)
    for point in curve:
        assert point["recall"] >= point["target_recall"]
    thresholds = [p["threshold"] for p in curve]
    compressions = [p["compression"] for p in curve]
    assert thresholds == sorted(thresholds, reverse=True) and thresholds[0] > thresholds[-1]
    assert compressions == sorted(compressions, reverse=True)
    assert curve[-1]["target_recall"] == pytest.approx(0.95)  # every gold line is reachable


def test_threshold_for_recall_takes_the_next_point_up_and_refuses_beyond_the_curve():
    curve = [{"target_recall": 0.5, "threshold": 0.9, "recall": 0.52, "compression": 0.97},
             {"target_recall": 0.6, "threshold": 0.8, "recall": 0.61, "compression": 0.95}]
    assert threshold_for_recall(curve, 0.5) == 0.9
    assert threshold_for_recall(curve, 0.55) == 0.8  # between two targets: the one that reaches it
    with pytest.raises(ValueError, match="beyond this encoder's dev curve"):
        threshold_for_recall(curve, 0.9)
    assert threshold_for_recall(curve, 0.9, lenient=True) == 0.8
    with pytest.raises(ValueError, match="no dev operating curve"):
        threshold_for_recall([], 0.6)
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        threshold_for_recall(curve, 0)


def test_the_default_is_the_highest_recall_within_the_reading_budget():
    curve = [{"target_recall": 0.5, "compression": 0.93}, {"target_recall": 0.55, "compression": 0.91},
             {"target_recall": 0.6, "compression": 0.89}]
    assert recall_first_target(curve, 0.90) == 0.55
    assert recall_first_target(curve, 0.85) == 0.6
    with pytest.raises(ValueError, match="compression >= 0.95"):
        recall_first_target(curve, 0.95)


def test_kept_lines_budget_keeps_the_best_scoring_in_source_order():
    scores = np.array([0.1, 0.9, 0.2, 0.7, 0.95, 0.3])
    assert cap_kept_lines([2, 4, 5], scores, 2) == [2, 5]
    assert cap_kept_lines([2, 4, 5], scores, None) == [2, 4, 5]
    assert cap_kept_lines([2], scores, 5) == [2]


@pytest.fixture(scope="module")
def shipped_copy(tmp_path_factory):
    """The shipped encoder with a made-up curve (the real one is measured on dev by the job)."""
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR

    target = tmp_path_factory.mktemp("enc") / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, target)
    config = json.loads((target / "squeez_encoder.json").read_text())
    config["operating_points"] = {"int8": [{"target_recall": 0.3, "threshold": 0.99, "recall": 0.3, "compression": 0.99},
                                           {"target_recall": 0.9, "threshold": 0.01, "recall": 0.9, "compression": 0.2}]}
    config["default_recall_target"] = 0.3
    (target / "squeez_encoder.json").write_text(json.dumps(config))
    return target


LOG = "\n".join([f"tests/test_mod.py::test_case_{i} PASSED" for i in range(40)]
                + ["tests/test_mod.py::test_parse FAILED", "E   AssertionError: expected 3, got 2",
                   "1 failed, 40 passed in 0.5s"])


def test_onnx_runtime_answers_at_the_recall_asked_for(shipped_copy):
    from squeez_ray.infer.registry import build_pruner

    default = build_pruner("encoder", model=str(shipped_copy))
    assert default.threshold == 0.99  # the checkpoint's default recall target, read off its curve
    generous = build_pruner("encoder", model=str(shipped_copy), recall_target=0.9)
    assert generous.threshold == 0.01
    wide = generous.prune("why does test_parse fail", LOG)
    assert wide.kept_lines > default.prune("why does test_parse fail", LOG).kept_lines
    capped = build_pruner("encoder", model=str(shipped_copy), recall_target=0.9, max_kept_lines=3)
    assert capped.prune("why does test_parse fail", LOG).kept_lines == 3
    # per request, in one batch: each request gets its own operating point
    low, high, bad = default.prune_batch([PruneRequest("why does test_parse fail", LOG),
                                          PruneRequest("why does test_parse fail", LOG, recall_target=0.9),
                                          PruneRequest("why does test_parse fail", LOG, max_kept_lines=0)])
    assert high.kept_lines == wide.kept_lines and high.kept_lines > low.kept_lines
    assert not bad.pruned and "max_kept_lines" in bad.reason and low.pruned


def test_bad_knobs_are_refused_when_the_pruner_is_built(shipped_copy):
    from squeez_ray.infer.registry import build_pruner

    with pytest.raises(ValueError, match="not both"):
        build_pruner("encoder", model=str(shipped_copy), threshold=0.5, recall_target=0.6)
    with pytest.raises(ValueError, match="beyond"):
        build_pruner("encoder", model=str(shipped_copy), recall_target=0.95)
    with pytest.raises(ValueError, match="at least 1"):
        build_pruner("encoder", model=str(shipped_copy), max_kept_lines=0)


def test_calibrate_job_measures_the_curve_on_dev_and_sets_the_default(tmp_path):
    """jobs/calibrate_encoder.py end to end on the shipped weights and a few real-looking dev rows."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "jobs"))
    from calibrate_encoder import main

    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR

    model = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, model)
    config = json.loads((model / "squeez_encoder.json").read_text())
    config.pop("operating_points"), config.pop("default_recall_target")
    (model / "squeez_encoder.json").write_text(json.dumps(config))
    assert main(["--model", str(model), "--default-recall-target", "0.5"]) == 2  # no stored curve, no dev data
    rows = [{"id": "d1", "tool": "test_output", "query": "why does test_parse fail", "output": LOG, "gold": [[41, 42]]},
            {"id": "d2", "tool": "test_output", "query": "which tests were skipped", "output": LOG, "gold": []}]
    dev = tmp_path / "dev.jsonl"  # the evaluation-cases format, as a dev split may be kept
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--model", str(model), "--dev-data", str(dev), "--min-compression", "0.5"]) == 0
    written = json.loads((model / "squeez_encoder.json").read_text())
    curve = written["operating_points"]["int8"]
    assert curve and all(p["recall"] >= p["target_recall"] for p in curve)
    assert written["default_recall_target"] == max(p["target_recall"] for p in curve if p["compression"] >= 0.5)
    card = json.loads((model / "model_card.json").read_text())
    assert card["operating_points"]["dev_data"]["examples"] == 2
