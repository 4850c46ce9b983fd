"""The learned fusion at run time: its file, how a model directory names it, that a directory without
one scores exactly as before, and what the shipped fused model does on look-alike blocks and exact
symbols (the two failures it was fitted to fix)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from squeez_ray.infer.encoder.fusion import FUSION_FILE, FusionModel, load_fusion
from squeez_ray.infer.encoder.fusion_features import FEATURES, FEATURES_VERSION
from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
from squeez_ray.train.encoder.fusion_fit import fit_logistic


def _model(features=("enc_logit", "any_exact")) -> FusionModel:
    n = len(features)
    return FusionModel(tuple(features), np.zeros(n), np.ones(n), np.arange(1.0, n + 1), -1.0)


def test_fusion_file_round_trips_and_refuses_what_it_cannot_compute(tmp_path):
    model = _model()
    again = FusionModel.from_json(json.loads(json.dumps(model.to_json())))
    x = np.random.default_rng(0).normal(size=(5, len(FEATURES)))
    assert np.allclose(again.probabilities(x), model.probabilities(x))
    with pytest.raises(ValueError, match="feature version"):
        FusionModel.from_json({**model.to_json(), "version": FEATURES_VERSION + 1})
    with pytest.raises(ValueError, match="does not compute"):
        _model(("enc_logit", "no_such_feature"))
    assert load_fusion(tmp_path, {}) is None  # nothing recorded: no fusion
    with pytest.raises(FileNotFoundError, match="not there"):
        load_fusion(tmp_path, {"file": FUSION_FILE})
    (tmp_path / FUSION_FILE).write_text(json.dumps(model.to_json()))
    with pytest.raises(ValueError, match="differ"):
        load_fusion(tmp_path, {"file": FUSION_FILE, "features": ["enc_logit"]})
    assert load_fusion(tmp_path, {"file": FUSION_FILE, "features": list(model.features)}).features == model.features


def test_fit_learns_that_an_exact_hit_matters():
    rng = np.random.default_rng(1)
    xs, ys = [], []
    for _ in range(40):
        x = rng.normal(size=(30, len(FEATURES)))
        x[:, FEATURES.index("any_exact")] = rng.random(30) < 0.1
        y = (x[:, FEATURES.index("any_exact")] > 0) | (rng.random(30) < 0.02)
        xs.append(x), ys.append(y.astype(float))
    model = fit_logistic(xs, ys, ("enc_logit", "any_exact"))
    assert model.weights[1] > 1.0 and abs(model.weights[0]) < 0.5


@pytest.fixture(scope="module")
def shipped():
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner

    return OnnxEncoderPruner(DEFAULT_MODEL_DIR)


def test_a_model_dir_without_fusion_scores_as_the_encoder_alone(tmp_path, shipped):
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner

    plain = tmp_path / "plain"
    shutil.copytree(DEFAULT_MODEL_DIR, plain)
    config = json.loads((plain / "squeez_encoder.json").read_text())
    config.pop("fusion", None)
    (plain / "squeez_encoder.json").write_text(json.dumps(config))
    (plain / FUSION_FILE).unlink(missing_ok=True)
    pruner = OnnxEncoderPruner(plain, threshold=0.5)
    pair = [("why does test_parse fail", "a\nE   AssertionError in test_parse\nb")]
    assert pruner.fusion is None
    assert np.array_equal(pruner.score(pair)[0], shipped.encoder_scores(pair)[0])


def look_alike_failures(n: int = 12) -> tuple[str, dict[str, range]]:
    lines, blocks = ["============================= FAILURES ============================="], {}
    for i in range(n):
        name = f"test_parse_field_{i}"
        start = len(lines) + 1
        lines += [f"_______________________ {name} _______________________", "", f"    def {name}():",
                  f">       assert parse_field(SAMPLES[{i}]) == EXPECTED[{i}]",
                  f"E       AssertionError: assert {{'k': {i}}} == {{'k': {i + 1}}}", "",
                  f"tests/test_parse.py:{10 + 5 * i}: AssertionError"]
        blocks[name] = range(start, len(lines) + 1)
    lines.append(f"========================= {n} failed in 0.42s =========================")
    return "\n".join(lines), blocks


def test_the_shipped_model_is_fused():
    config = json.loads((DEFAULT_MODEL_DIR / "squeez_encoder.json").read_text())
    assert config["fusion"]["features"] and (DEFAULT_MODEL_DIR / FUSION_FILE).is_file()


def test_a_query_naming_one_of_twelve_look_alike_failures_gets_that_block(shipped):
    output, blocks = look_alike_failures()
    query = "why does test_parse_field_7 fail"
    fused = shipped.score([(query, output)])[0]
    named = blocks["test_parse_field_7"]
    best = int(np.argmax(fused)) + 1
    assert best in named
    inside = max(fused[i - 1] for i in named)
    outside = max(fused[i - 1] for name, r in blocks.items() if name != "test_parse_field_7" for i in r)
    assert inside > outside  # the encoder alone: its best line is in the first failure, not the named one
    kept = shipped.prune(query, output)
    assert kept.spans and any(s <= n <= e for s, e in kept.spans for n in named)


@pytest.mark.xfail(strict=True, reason="known gap of the shipped fusion (100 training outputs): it still ranks "
                   "the F401 finding first (so does a refit on 630 examples); docs/ENCODER.md, 'Fusion'. Remove the mark when a "
                   "better model fixes it")
def test_an_exact_code_hit_outranks_a_look_alike_finding(shipped):
    # the encoder alone ranks the F401 finding above the E501 the query names (0.95 vs 0.83)
    output = "src/app/a.py:3:80: E501 line too long (91 > 79 characters)\nsrc/app/b.py:7:1: F401 'os' imported but unused\nsrc/app/c.py:9:100: W505 doc line too long (101 > 79 characters)\nsrc/app/d.py:2:1: E302 expected 2 blank lines, found 1"
    fused = shipped.score([("where is E501 reported", output)])[0]
    assert int(np.argmax(fused)) == 0
