"""The whole-output negative gate: its features, its settings, the shipped model's use of it, and its fit job."""

import json
import shutil
import types

import numpy as np
import pytest

from squeez_ray.infer.encoder.negative_gate import FEATURES, NegativeGate, gate_features

pytestmark = pytest.mark.unit

LINT = "\n".join([f"src/pkg/mod{i}.py:{i * 3 + 1}:80: E501 line too long ({90 + i} > 79 characters)" for i in range(30)]
                 + [f"src/pkg/util.py:{i + 1}:1: F401 'os' imported but unused" for i in range(3)] + ["Found 33 errors."])


def feature(name, query, lines, scores, threshold=0.5):
    return gate_features(query, "\n".join(lines), np.asarray(scores, dtype=float), threshold)[FEATURES.index(name)]


def test_features_read_the_querys_symbols_and_terms_against_the_whole_output():
    lines = ["def parse_config(path):", "    return load(path)", "", "def main():", "    parse_config('a.toml')"]
    scores = [0.9, 0.2, 0.0, 0.1, 0.6]
    assert feature("query_symbols_found", "where is parse_config defined", lines, scores) == 1.0
    assert feature("query_symbols_found", "where is parse_settings defined", lines, scores) == 0.0
    assert feature("query_names_symbols", "where is parse_settings defined", lines, scores) == 1.0
    assert feature("query_symbols_found", "where is the config parsed", lines, scores) == 1.0  # names none
    assert feature("query_names_symbols", "where is the config parsed", lines, scores) == 0.0
    assert feature("query_terms_found", "parse config retries", lines, scores) == pytest.approx(2 / 3)
    assert feature("log_lines_kept", "x", lines, scores) == pytest.approx(np.log1p(2))  # 0.9 and 0.6 >= 0.5
    assert feature("best_logit", "x", lines, scores) == pytest.approx(np.log(0.9 / 0.1))


def test_the_runtimes_per_line_terms_give_the_features_the_whole_text_gives():
    """The pruner hands the gate the per-line terms block_scores already read, instead of re-reading the
    output: the features must be the ones the gate was fitted on (terms of the whole text)."""
    from squeez_ray.infer.encoder.fusion_features import line_terms_of

    lines = LINT.split("\n") + ["def parse_config(path):", "    ParseConfig.load(path)  # HTTPAdapter", ""]
    scores = np.linspace(0.0, 0.9, len(lines))
    for query in ("Which files have unused imports flagged by F401?", "where is ParseConfig loaded", "http adapter",
                  "Where is load_backoff_policy defined?", "?"):
        whole = gate_features(query, "\n".join(lines), scores, 0.5)
        reused = gate_features(query, "\n".join(lines), scores, 0.5, line_terms_of(lines))
        assert np.array_equal(whole, reused), query


def test_gate_settings_are_checked_and_a_gate_of_other_features_does_not_load():
    good = NegativeGate((0.0,) * 6, (1.0,) * 6, (0.5,) * 6, -1.0, 0.5)
    assert NegativeGate.from_json(json.loads(json.dumps(good.to_json()))) == good
    with pytest.raises(ValueError, match="refit it"):
        NegativeGate.from_json({**good.to_json(), "features": [*FEATURES[:-1], "something_else"]})
    with pytest.raises(ValueError, match="refit it"):
        NegativeGate.from_json({**good.to_json(), "version": 99})
    with pytest.raises(ValueError, match="6 values"):
        NegativeGate((0.0,) * 5, (1.0,) * 5, (0.5,) * 5, 0.0, 0.5)
    with pytest.raises(ValueError, match="cut"):
        NegativeGate((0.0,) * 6, (1.0,) * 6, (0.5,) * 6, 0.0, 0.0)
    # the probability is the logistic of the standardised features
    x = np.arange(6, dtype=float)
    assert good.p_negative(x) == pytest.approx(1 / (1 + np.exp(-(0.5 * x.sum() - 1.0))))


def test_the_shipped_model_answers_a_near_miss_with_nothing_and_only_at_its_default_point():
    from squeez_ray.infer.registry import build_pruner

    pruner = build_pruner("encoder")
    assert pruner.negative_gate is not None, "the shipped model carries a negative gate"
    named = pruner.prune("Which files have unused imports flagged by F401?", LINT)
    assert "F401 'os' imported but unused" in named.text
    near_miss = "Which lines trigger W605 invalid escape sequence warnings?"
    gated = pruner.prune(near_miss, LINT)
    assert gated.text == "" and "negative gate" in gated.reason
    # the threshold alone keeps lines of it: the gate is what empties the answer
    assert build_pruner("encoder", engine_kwargs={"negative_gate": False}).prune(near_miss, LINT).text
    # a caller who moves the operating point asked for the threshold's trade, not the gate's
    assert build_pruner("encoder", recall_target=0.7).negative_gate is None
    assert build_pruner("encoder", threshold=pruner.threshold).negative_gate is None
    with pytest.raises(ValueError, match="negative_gate must be true or false"):
        build_pruner("encoder", engine_kwargs={"negative_gate": "no"})


def _split(rng, n, negatives, prefix):
    """Grep-like outputs whose answer line the "encoder" scores 0.9; a negative's query names a symbol the
    output lacks, and its best look-alike still passes the threshold (so only a gate can answer nothing)."""
    rows, scores = [], {}
    for i in range(n):
        lines = [f"src/mod{j}.py:{j}: value = compute_{j}(x)" for j in range(120)]
        answer = int(rng.integers(0, 120))
        lines[answer] = f"src/config.py:{answer}: retries = parse_retry_limit(env)"
        s = rng.uniform(0.0, 0.05, 120)
        negative = i < negatives
        s[answer] = rng.uniform(0.25, 0.45) if negative else rng.uniform(0.7, 0.95)
        query = "where is load_backoff_policy called" if negative else "where is parse_retry_limit called"
        gold = [] if negative else [{"start_line": answer + 1, "end_line": answer + 1}]
        rows.append({"instance_id": f"{prefix}{i}", "query": query, "tool_type": "grep",
                     "tool_output": "\n".join(lines), "gold_spans": gold})
        scores[f"{prefix}{i}"] = s
    return rows, scores


def _fit(tmp_path, train, dev, scores):
    import pandas as pd

    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.train.encoder import negative_gate_fit as job
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, score_to_cache

    model = tmp_path / "model"
    if not model.exists():
        shutil.copytree(DEFAULT_MODEL_DIR, model)
    settings = OnnxEncoderPruner(model).settings
    for name, rows in (("train", train), ("dev", dev)):
        pd.DataFrame(rows).to_parquet(tmp_path / f"{name}.parquet")
        cache = tmp_path / "cache" / name
        shutil.rmtree(cache, ignore_errors=True)
        claim_for_model(cache, job.runtime_id(model, settings))
        by_id = {r["instance_id"]: scores[r["instance_id"]] for r in rows}
        ids = iter([r["instance_id"] for r in rows])
        score_to_cache(lambda pairs: [by_id[next(ids)] for _ in pairs],  # the "runtime" of this test
                       [(r["instance_id"], r["query"], r["tool_output"]) for r in rows], cache)
    args = types.SimpleNamespace(model=str(model), train_data=str(tmp_path / "train.parquet"), exclude_data=None,
                                 dev_data=str(tmp_path / "dev.parquet"), cache=str(tmp_path / "cache"),
                                 cached_only=True, c_grid=[1.0], report=str(tmp_path / "report.json"), write=True)
    return model, job.run(args)["report"]


def test_the_fit_job_ships_a_gate_that_wins_on_dev_and_the_model_then_uses_it(tmp_path):
    from squeez_ray.infer.registry import build_pruner

    rng = np.random.default_rng(0)
    train, train_scores = _split(rng, 80, 20, "t")
    dev, dev_scores = _split(rng, 60, 15, "d")
    model, report = _fit(tmp_path, train, dev, {**train_scores, **dev_scores})
    assert report["no_gate"]["negatives_empty"] == 0.0  # every look-alike passes the threshold
    chosen = report["chosen"]
    assert report["ships"] and chosen["negatives_empty"] >= 0.9
    assert chosen["recall"] >= report["no_gate"]["recall"] - 0.01 and chosen["f1"] >= report["no_gate"]["f1"] - 0.005
    stored = json.loads((model / "squeez_encoder.json").read_text())["negative_gate"]
    assert stored["cut"] == chosen["cut"] and stored["fitted_on"]["train_negatives"] == 20
    pruner = build_pruner("encoder", model=str(model))
    assert pruner.negative_gate == NegativeGate.from_json(stored)


def test_a_gate_that_does_not_gain_on_dev_is_not_written_and_clears_an_old_one(tmp_path):
    rng = np.random.default_rng(1)
    train, train_scores = _split(rng, 80, 20, "t")
    # dev negatives that look exactly like positives to every feature: no cut gains without losing recall
    dev, dev_scores = _split(rng, 60, 0, "d")
    for row in dev[:15]:
        row["gold_spans"] = []
        row["query"] = "where is parse_retry_limit called"
    model, report = _fit(tmp_path, train, dev, {**train_scores, **dev_scores})
    assert not report["ships"]
    assert json.loads((model / "squeez_encoder.json").read_text())["negative_gate"] == {}


def test_the_strictest_cut_within_the_losses_is_chosen():
    from squeez_ray.train.encoder.block_decoder_fit import Example
    from squeez_ray.train.encoder.negative_gate_fit import choose_cut

    def example(gold):
        return Example("q", ["a"] * 10, set(gold), "grep", [], np.empty(0), [])

    examples = [example([1])] * 8 + [example([])] * 2
    kept = [[1]] * 10  # every positive found, every negative answered with a line
    # the gate is sure of the two negatives (0.9, 0.8) and unsure of one positive (0.3)
    p = np.array([0.3] + [0.05] * 7 + [0.9, 0.8])
    cut, point, _ = choose_cut(examples, kept, p)
    assert cut == pytest.approx(0.31) and point["negatives_empty"] == 1.0 and point["recall"] == 1.0


def test_the_command_line_leaves_empty_answers_to_its_own_fallback_rule():
    """In a pipe an empty answer becomes a head-and-tail sample unless the output is clearly beside the query
    (cli/pruning.never_empty), so the command line turns the model's gate off unless engine_kwargs ask."""
    from squeez_ray.cli import settings as settings_mod
    from squeez_ray.infer.registry import build_pruner

    options = settings_mod.backend_options(settings_mod.Settings(backend="encoder"))
    assert options.engine_kwargs == {"negative_gate": False}
    assert build_pruner("encoder", options).negative_gate is None
    asked = settings_mod.backend_options(settings_mod.Settings(backend="encoder", engine_kwargs={"negative_gate": True}))
    assert build_pruner("encoder", asked).negative_gate is not None
    assert settings_mod.backend_options(settings_mod.Settings(backend="bm25")).engine_kwargs == {}
