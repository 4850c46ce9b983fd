"""jobs/fit_fusion.py end to end on a few short rows: encoder scores cached once, variants compared on
dev, and a fused model directory the runtime loads (fusion.json named in squeez_encoder.json, a dev
curve of the fused scores)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


def _rows(prefix: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        names = [f"test_item_{k}" for k in range(6)]
        lines = [line for k, name in enumerate(names) for line in (f"____ {name} ____", f"E   assert {k} == {k + 1}", "")]
        target = i % 6
        rows.append({"instance_id": f"{prefix}{i}", "query": f"why does test_item_{target} fail",
                     "tool_output": "\n".join(lines + [f"run {i % 4}"]),  # four distinct outputs
                     "gold_spans": [{"start_line": 3 * target + 1, "end_line": 3 * target + 2}],
                     "tool_type": "test_output"})
    return rows


def test_fit_fusion_job_caches_scores_compares_and_writes_a_loadable_model(tmp_path, capsys):
    sys.path.insert(0, str(REPO / "jobs"))
    from fit_fusion import main

    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner

    pd.DataFrame(_rows("t", 12)).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame(_rows("d", 6)).to_parquet(tmp_path / "dev.parquet")
    args = ["--train-data", str(tmp_path / "train.parquet"), "--dev-data", str(tmp_path / "dev.parquet"),
            "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "fused"), "--report",
            str(tmp_path / "report.json"), "--recall-target", "0.5", "--min-compression", "0.3", "--kinds", "logistic,trees-monotone",
            "--model", str(REPO / "tests" / "fixtures" / "no_such_model")]
    assert main(args) == 2  # a missing model is a one-line error
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR

    plain = tmp_path / "plain"
    import shutil

    shutil.copytree(DEFAULT_MODEL_DIR, plain)
    config = json.loads((plain / "squeez_encoder.json").read_text())
    config.pop("fusion", None)
    (plain / "squeez_encoder.json").write_text(json.dumps(config))
    args[-1] = str(plain)
    assert main(args + ["--learning-curve"]) == 0
    assert len(list((tmp_path / "cache" / "dev").glob("scores-*.npz"))) == 1  # 6 rows: one chunk
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["dev_examples"] == 6 and report["train_examples"] == 12
    assert {"encoder", "encoder+lexical+block (logistic)", "lexical-only (logistic)"} <= set(report["variants"])
    assert report["variants"]["encoder+lexical+block (trees-monotone)"]["max_depth"] in (2, 3)
    # the winner refitted on a share of the train outputs (12 rows on 4 outputs, 3 rows each)
    curve = report["learning_curve"]
    assert [(p["share"], p["outputs"], p["examples"]) for p in curve] == [(0.25, 1, 3), (0.5, 2, 6), (1.0, 4, 12)]
    assert curve[-1]["at_recall_target"] == report["summary"][report["winner"]]["at_recall_target"]
    written = json.loads((tmp_path / "fused" / "squeez_encoder.json").read_text())
    assert written["fusion"]["variant"] == report["winner"] and written["operating_points"]["int8"]
    pruner = OnnxEncoderPruner(tmp_path / "fused")
    assert pruner.fusion is not None and pruner.fusion.features == tuple(written["fusion"]["features"])

    # the cache belongs to the model that filled it: another model's run is refused, not fitted on stale scores
    other = tmp_path / "other"
    shutil.copytree(plain, other)
    # (other windows score differently; a new threshold alone would not: see the test below)
    (other / "squeez_encoder.json").write_text(json.dumps(
        {**config, "window": {**config["window"], "overlap_lines": config["window"]["overlap_lines"] + 1}}))
    capsys.readouterr()
    assert main(args[:-1] + [str(other)]) == 2
    assert "holds scores of another model" in capsys.readouterr().err
    # and an id whose output changed under it (a rebuilt split) is a stale cache, not a silent mis-fit
    changed = pd.read_parquet(tmp_path / "dev.parquet")
    changed.loc[0, "tool_output"] += "\none more line"
    changed.to_parquet(tmp_path / "dev.parquet")
    assert main(args) == 2
    assert "the cache is stale" in capsys.readouterr().err
    assert main([*args[:-2], "--model", str(tmp_path / "fused")]) == 2  # refuses to fuse a fused model


def test_the_encoders_own_outputs_are_left_out_by_text_not_by_id(tmp_path):
    """A later labelling round asks new queries of outputs the encoder trained on, under new ids: the
    encoder's scores there are over-confident, so the fit must not see those outputs at all."""
    from squeez_ray.train.encoder.fusion_job import _rows as fit_rows

    seen = _rows("old", 1)[0]
    fresh = {**_rows("new", 2)[1], "tool_output": "collected 2 items\nE   assert 0 == 1"}
    requeried = {**seen, "instance_id": "round3-0", "query": "which test passed"}
    pd.DataFrame([requeried, fresh]).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame([seen]).to_parquet(tmp_path / "encoder_train.parquet")
    kept = fit_rows(str(tmp_path / "train.parquet"), limit=None, max_lines=None,
                    exclude=str(tmp_path / "encoder_train.parquet"))
    assert [r["instance_id"] for r in kept] == ["new1"]


def test_monotone_trees_never_score_a_line_lower_for_more_evidence():
    """The "trees-monotone" combiner: raising the encoder's logit or an exact hit, all else equal, never
    lowers the fused probability; the unconstrained trees fitted on the same noisy data do (else the
    constraint would be untested)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from squeez_ray.infer.encoder.fusion_features import FEATURES
    from squeez_ray.train.encoder.fusion_fit import fit_trees

    rng = np.random.default_rng(0)
    features = ("enc_logit", "exact_hits", "line_len")
    xs, ys = [], []
    for _ in range(40):
        x = np.zeros((50, len(FEATURES)))
        for name in features:
            x[:, FEATURES.index(name)] = rng.normal(size=50)
        logit = x[:, FEATURES.index("enc_logit")]
        # mostly rising with the evidence, with a dip the unconstrained trees will learn
        p = 1 / (1 + np.exp(-(2 * logit - 3 * ((logit > 0.5) & (logit < 1.0)))))
        xs.append(x)
        ys.append(rng.random(50) < p)
    grid = np.zeros((200, len(FEATURES)))
    grid[:, FEATURES.index("enc_logit")] = np.linspace(-3, 3, 200)
    for name in ("exact_hits", "line_len"):
        grid[:, FEATURES.index(name)] = 0.3
    # One OpenMP thread: scikit-learn's histogram GBM opens a parallel region per tree, and beside the other
    # test workers on a 2-core CI its threads waited on each other (115 s for these 2,000 rows, not seconds).
    with threadpool_limits(1):
        monotone, _ = fit_trees(xs, ys, features, max_depth=3, monotone=True)
        free, _ = fit_trees(xs, ys, features, max_depth=3)
    assert np.all(np.diff(monotone.probabilities(grid)) >= -1e-12)
    assert np.any(np.diff(free.probabilities(grid)) < -1e-6)
    more_hits = grid.copy()
    more_hits[:, FEATURES.index("exact_hits")] = 2.0
    assert np.all(monotone.probabilities(more_hits) >= monotone.probabilities(grid) - 1e-12)


def test_the_score_cache_resumes_by_instance_id_not_chunk_position(tmp_path):
    """A rerun over another selection of rows (another --max-train-lines: a new seeded order) scores the
    rows the cache lacks, all of them and only them; a run killed mid-way resumes where it stopped."""
    import numpy as np
    import pytest

    from squeez_ray.train.encoder.fusion_scores import read_cache, score_to_cache

    scored: list[str] = []

    def score(pairs):
        scored.extend(q for q, _ in pairs)
        return [np.full(len(out.split("\n")), float(q[1:])) for q, out in pairs]

    rows = [(f"id{i}", f"q{i}", "a\nb") for i in range(10)]
    assert score_to_cache(score, rows, tmp_path, chunk=4) == 3 and len(scored) == 10
    assert score_to_cache(score, rows, tmp_path, chunk=4) == 0 and len(scored) == 10
    more = rows[::-1][:7] + [(f"id{i}", f"q{i}", "a\nb\nc") for i in range(10, 13)]  # another order, 3 new
    assert score_to_cache(score, more, tmp_path, chunk=4) == 1 and scored[10:] == ["q10", "q11", "q12"]

    def dies_after_one_chunk(pairs):
        if len(scored) >= 13 + 4:
            raise KeyboardInterrupt
        return score(pairs)

    fresh = [(f"id{i}", f"q{i}", "x") for i in range(13, 23)]
    with pytest.raises(KeyboardInterrupt):
        score_to_cache(dies_after_one_chunk, fresh, tmp_path, chunk=4)
    assert score_to_cache(score, fresh, tmp_path, chunk=4) == 2 and scored[17:] == [f"q{i}" for i in range(17, 23)]
    cache = read_cache([tmp_path])
    assert sorted(cache, key=lambda k: int(k[2:])) == [f"id{i}" for i in range(23)]
    assert cache["id12"].tolist() == [12.0, 12.0, 12.0]


def test_the_cache_is_claimed_by_what_decides_encoder_scores_not_by_thresholds(tmp_path):
    """Recalibrating a model (thresholds, dev curves, default recall target) keeps its cached scores;
    other windows or other weights are another model, refused."""
    import shutil

    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, model_id

    model = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, model)
    claim_for_model(tmp_path / "cache", model_id(model))
    settings = json.loads((model / "squeez_encoder.json").read_text())
    settings.update(threshold=0.123, variant_thresholds={"int8": 0.123}, default_recall_target=0.9,
                    operating_points={})
    (model / "squeez_encoder.json").write_text(json.dumps(settings))
    (model / "model_card.json").write_text("{}")
    claim_for_model(tmp_path / "cache", model_id(model))  # same scores: accepted

    settings["window"]["overlap_lines"] += 1
    (model / "squeez_encoder.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match="holds scores of another model"):
        claim_for_model(tmp_path / "cache", model_id(model))
    settings["window"]["overlap_lines"] -= 1
    (model / "squeez_encoder.json").write_text(json.dumps(settings))
    with open(model / "model.int8.onnx", "ab") as graph:
        graph.write(b"\0")
    with pytest.raises(ValueError, match="holds scores of another model"):
        claim_for_model(tmp_path / "cache", model_id(model))
