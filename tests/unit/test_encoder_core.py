"""Encoder pruner pieces: windows, line pooling, calibration, gap bridging, and the backend's contract."""

from __future__ import annotations

import numpy as np
import pytest

from squeez_ray.infer.encoder.scoring import select_lines
from squeez_ray.infer.encoder.windows import WindowSpec, build_windows
from squeez_ray.train.encoder.calibration import calibrate_threshold


def test_windows_cover_every_line_and_respect_length():
    lines = [[7] * n for n in (3, 10, 1, 0, 25, 4, 4, 9)]
    spec = WindowSpec(max_length=24, max_query_tokens=4, max_tokens_per_line=8, overlap_lines=1)
    windows = build_windows([5, 5, 5, 5, 5, 5], lines, spec, cls_id=1, sep_id=2)
    covered = set()
    for w in windows:
        assert len(w.input_ids) <= spec.max_length
        assert w.input_ids[:6] == [1, 5, 5, 5, 5, 2]  # the query is capped at max_query_tokens
        assert len(w.input_ids) == len(w.token_type_ids) == len(w.line_of_token)
        covered.update(range(w.first_line, w.first_line + w.n_lines))
        # every window line owns at least its marker token
        assert set(t for t in w.line_of_token if t >= 0) == set(range(w.n_lines))
    assert covered == set(range(len(lines)))
    assert len(windows) > 2
    # consecutive windows overlap by (up to) one line and always advance
    for a, b in zip(windows, windows[1:]):
        assert a.first_line < b.first_line <= a.first_line + a.n_lines


def test_empty_output_still_gets_one_window():
    windows = build_windows([5], [[]], WindowSpec(max_length=16), cls_id=1, sep_id=2)
    assert len(windows) == 1 and windows[0].n_lines == 1 and windows[0].input_ids == [1, 5, 2, 2]


def test_select_lines_threshold_and_bridging():
    scores = np.array([0.9, 0.1, 0.8, 0.1, 0.1, 0.1, 0.7, 0.2])
    assert select_lines(scores, 0.5, bridge_gap=0) == [1, 3, 7]
    assert select_lines(scores, 0.5, bridge_gap=1) == [1, 2, 3, 7]
    assert select_lines(scores, 0.5, bridge_gap=3) == [1, 2, 3, 4, 5, 6, 7]
    assert select_lines(scores, 0.95, bridge_gap=3) == []  # nothing passes: an empty answer (negative)


@pytest.mark.parametrize("target", [0.5, 0.8, 0.9, 1.0])
def test_calibration_hits_target_recall(target):
    rng = np.random.default_rng(0)
    labels = [rng.random(200) < 0.1 for _ in range(20)]
    scores = [np.where(y, rng.normal(0.7, 0.15, y.size), rng.normal(0.3, 0.15, y.size)) for y in labels]
    result = calibrate_threshold(scores, labels, target)
    flat_s, flat_y = np.concatenate(scores), np.concatenate(labels)
    recall = (flat_s[flat_y] >= result["threshold"]).mean()
    assert recall >= target and result["recall"] == pytest.approx(recall)
    # it is the highest such threshold: any higher one misses the target
    positives = flat_s[flat_y]
    higher = positives[positives > result["threshold"]]
    if higher.size:
        assert (positives >= higher.min()).mean() < target


def test_calibration_needs_positives():
    with pytest.raises(ValueError, match="no positive lines"):
        calibrate_threshold([np.array([0.1, 0.2])], [np.array([False, False])], 0.8)


def test_line_labels_take_spans_as_ray_data_hands_them_over():
    from squeez_ray.train.encoder.data import line_labels

    spans = np.array([{"start_line": 2, "end_line": 3}, {"start_line": 6, "end_line": 6}], dtype=object)
    assert line_labels(7, spans).tolist() == [0, 1, 1, 0, 0, 1, 0]
    assert line_labels(3, [(1, 1)]).tolist() == [1, 0, 0]
    assert line_labels(3, None).tolist() == line_labels(3, np.array([], dtype=object)).tolist() == [0, 0, 0]


def test_calibration_curve_trades_recall_for_kept_lines():
    from squeez_ray.train.encoder.calibration import calibration_curve

    rng = np.random.default_rng(1)
    labels = [rng.random(300) < 0.1 for _ in range(10)]
    scores = [np.where(y, rng.normal(0.7, 0.2, y.size), rng.normal(0.3, 0.2, y.size)) for y in labels]
    curve = calibration_curve(scores, labels, recalls=(0.3, 0.6, 0.9))
    assert [p["target_recall"] for p in curve] == [0.3, 0.6, 0.9]
    assert all(p["recall"] >= p["target_recall"] for p in curve)
    thresholds, kept = [p["threshold"] for p in curve], [p["kept_share"] for p in curve]
    assert thresholds == sorted(thresholds, reverse=True) and kept == sorted(kept) and kept[0] < kept[-1]


def test_threshold_for_kept_share_keeps_that_share():
    from squeez_ray.train.encoder.calibration import threshold_for_kept_share

    rng = np.random.default_rng(2)
    labels = [rng.random(500) < 0.1 for _ in range(8)]
    scores = [rng.random(500) for _ in labels]
    point = threshold_for_kept_share(scores, labels, 0.1)
    flat = np.concatenate(scores)
    assert (flat >= point["threshold"]).mean() == pytest.approx(0.1, abs=1e-3) == point["kept_share"]
    with pytest.raises(ValueError, match="kept_share"):
        threshold_for_kept_share(scores, labels, 0.0)


def test_ranking_auc_matches_pair_counting():
    from squeez_ray.train.encoder.calibration import ranking_auc

    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, size=60).astype(float)  # many ties
    labels = rng.random(60) < 0.3
    pos, neg = scores[labels], scores[~labels]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert ranking_auc(scores, labels) == pytest.approx(pairs / (len(pos) * len(neg)))
    assert ranking_auc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0
    assert ranking_auc(np.array([0.1, 0.9]), np.array([True, True])) is None


def test_breakdown_by_tool_type_shows_the_weak_family():
    from squeez_ray.train.encoder.calibration import breakdown_by_group

    good = (np.array([0.9, 0.1, 0.2]), np.array([True, False, False]))
    weak = (np.array([0.2, 0.9, 0.1]), np.array([True, False, False]))
    table = breakdown_by_group([good[0], weak[0]], [good[1], weak[1]], ["grep", "read_file"], threshold=0.5)
    assert table["grep"]["auc"] == 1.0 and table["grep"]["recall"] == 1.0 and table["grep"]["precision"] == 1.0
    assert table["read_file"]["auc"] == 0.5 and table["read_file"]["recall"] == 0.0
    assert table["read_file"]["examples"] == 1 and table["read_file"]["lines"] == 3


def test_f1_calibration_counts_each_example_once_and_respects_the_kept_share():
    import numpy as np

    from squeez_ray.train.encoder.calibration import threshold_for_best_f1

    # Two positives whose gold line scores 0.9, one negative whose best line scores 0.5, one long
    # output (100 lines) with a gold line at 0.7 and noise below 0.6.
    scores = [np.array([0.1, 0.9, 0.2, 0.1]), np.array([0.9, 0.1, 0.1, 0.1]), np.array([0.5, 0.2, 0.1, 0.1]),
              np.concatenate([[0.7], np.linspace(0.0, 0.59, 99)])]
    labels = [np.array([0, 1, 0, 0]), np.array([1, 0, 0, 0]), np.zeros(4), np.concatenate([[1], np.zeros(99)])]
    point = threshold_for_best_f1(scores, labels, bridge_gap=0, max_kept_share=0.5)
    assert 0.59 < point["threshold"] <= 0.7  # keeps every gold line, drops the negative's 0.5
    assert point["f1"] == 1.0 and point["negatives_empty"] == 1.0
    tight = threshold_for_best_f1(scores, labels, bridge_gap=0, max_kept_share=0.2)
    assert tight["mean_kept_share"] <= 0.2
