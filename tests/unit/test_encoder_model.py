"""The encoder scorer on a tiny random BERT: windowed scoring, save/load, and the backend contract."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from squeez_ray.infer.encoder.model import EncoderSettings, load_scorer, save_scorer  # noqa: E402
from squeez_ray.infer.encoder.scoring import score_lines, windows_for  # noqa: E402
from squeez_ray.infer.encoder.windows import WindowSpec, window_batch_tensors  # noqa: E402

OUTPUT = "\n".join(["def alpha():", "    return 1", "", "class Beta:", "    pass", "x = alpha()", "print(x)"])


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    from squeez_ray.testing.tiny_encoder import build_tiny_encoder

    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


def test_windowed_scores_equal_a_single_pass_on_short_input(tiny_encoder):
    model, tokenizer, _ = load_scorer(tiny_encoder)
    spec = WindowSpec(max_length=512)
    n_lines, windows = windows_for(tokenizer, "where is Beta defined", OUTPUT, spec)
    assert len(windows) == 1 and n_lines == 7
    ids, mask, types, owner = window_batch_tensors(windows, 0)
    with torch.inference_mode():
        direct = torch.sigmoid(model(ids, mask, types, owner, n_lines)).numpy()[0]
    batched = score_lines(model, tokenizer, spec, [("where is Beta defined", OUTPUT)] * 3, dtype="float32")
    for scores in batched:
        np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-6)


def test_long_output_takes_each_lines_best_window(tiny_encoder):
    model, tokenizer, _ = load_scorer(tiny_encoder)
    long_output = "\n".join(f"line {i} value_{i}" for i in range(300))
    spec = WindowSpec(max_length=64, overlap_lines=3)
    _, windows = windows_for(tokenizer, "value_150", long_output, spec)
    assert len(windows) >= 3
    scores = score_lines(model, tokenizer, spec, [("value_150", long_output)], dtype="float32")[0]
    assert scores.shape == (300,) and np.all(scores > 0)  # every line was scored by some window
    # a line seen by two windows keeps the larger of its two scores
    a, b = windows[0], windows[1]
    shared = a.first_line + a.n_lines - 1
    assert b.first_line <= shared
    per_window = []
    for w in (a, b):
        ids, mask, types, owner = window_batch_tensors([w], 0)
        with torch.inference_mode():
            per_window.append(torch.sigmoid(model(ids, mask, types, owner, w.n_lines)).numpy()[0][shared - w.first_line])
    assert scores[shared] == pytest.approx(max(per_window), rel=1e-5)


def test_checkpoint_round_trip_and_backend_returns_only_input_lines(tiny_encoder, tmp_path):
    from squeez_ray.infer.registry import build_pruner

    model, tokenizer, _ = load_scorer(tiny_encoder)
    save_scorer(model, tokenizer, EncoderSettings(threshold=0.0, bridge_gap=1, base_model="tiny"), tmp_path / "ckpt")
    pruner = build_pruner("encoder", model=str(tmp_path / "ckpt"), dtype="float32")
    result = pruner.prune("where is Beta", OUTPUT, fail_open=False)
    source = OUTPUT.split("\n")
    assert result.pruned and result.total_lines == 7
    assert set(result.text.split("\n")) <= set(source)
    assert result.kept_lines == 7  # threshold 0 keeps every line
    strict = build_pruner("encoder", model=str(tmp_path / "ckpt"), threshold=1.01, dtype="float32")
    empty = strict.prune("where is Beta", OUTPUT, fail_open=False)
    assert empty.pruned and empty.kept_lines == 0 and empty.spans == [] and empty.text == ""


def test_backend_with_a_missing_model_dir_names_it(tmp_path):
    # (No --model at all means the shipped default: tests/integration/test_encoder_onnx.py.)
    from squeez_ray.infer.registry import build_pruner

    with pytest.raises(FileNotFoundError, match="no-such-dir.*no such checkpoint directory"):
        build_pruner("encoder", model=str(tmp_path / "no-such-dir"))


def test_recalibrate_moves_the_stored_threshold_to_a_kept_share(tiny_encoder, tmp_path):
    import json

    from squeez_ray.schema import write_examples
    from squeez_ray.train.encoder.calibration import recalibrate

    model, tokenizer, _ = load_scorer(tiny_encoder)
    save_scorer(model, tokenizer, EncoderSettings(threshold=0.0, base_model="tiny"), tmp_path / "ckpt")
    lines = OUTPUT.split("\n")
    rows = [{"instance_id": f"d{i}", "source": "synthetic", "tool_type": "read_file", "query": "where is Beta",
             "tool_output": OUTPUT, "gold_spans": [{"start_line": 4, "end_line": 5}], "is_irrelevant": False}
            for i in range(4)]
    write_examples(rows, tmp_path / "dev.jsonl")
    calibration = recalibrate(tmp_path / "ckpt", str(tmp_path / "dev.jsonl"), 0.8, target_kept_share=0.3)
    stored = json.loads((tmp_path / "ckpt" / "squeez_encoder.json").read_text())
    assert stored["threshold"] == calibration["threshold"] > 0.0
    assert calibration["kept_share"] <= 0.3 + 1 / len(lines) and len(calibration["curve"]) == 7
    manifest = json.loads((tmp_path / "ckpt" / "manifest.json").read_text())
    assert manifest["recalibrations"][0]["previous_threshold"] == 0.0
    with pytest.raises(ValueError, match="bare encoder"):
        recalibrate(tiny_encoder, str(tmp_path / "dev.jsonl"), 0.8)


def test_encoder_loads_without_the_unused_pooler(tiny_encoder, tiny_qwen3_dir):
    from transformers import AutoModel

    from squeez_ray.infer.encoder.model import _load_encoder

    # BERT-likes drop the sentence pooler at load (checkpoints are saved without it)...
    assert _load_encoder(AutoModel, tiny_encoder).pooler is None
    # ...and an architecture without that option still loads
    assert type(_load_encoder(AutoModel, tiny_qwen3_dir)).__name__ == "Qwen3Model"


def test_scoring_stops_between_passes_once_its_caller_has_gone(tiny_encoder):
    """What a Serve pruner replica relies on when a request times out: the check set around the call
    reaches the scoring loop in asyncio.to_thread's worker thread, which stops after the current pass."""
    import asyncio

    from squeez_ray.infer.cancel import Cancelled, cancel_when
    from squeez_ray.infer.encoder.scoring import score_windows

    _, tokenizer, _ = load_scorer(tiny_encoder)
    spec = WindowSpec(max_length=64, overlap_lines=3)
    long_output = "\n".join(f"line {i} value_{i}" for i in range(300))
    passes: list[int] = []

    def forward(ids, mask, types, owner, n_lines):
        passes.append(len(ids))
        return np.ones((len(ids), n_lines), dtype=np.float32)

    score_windows(forward, tokenizer, spec, [("q", long_output)], tokens_per_batch=64)
    assert len(passes) >= 3  # uncancelled: one pass per window
    passes.clear()

    async def gone_after_one_pass():
        with cancel_when(lambda: len(passes) >= 1):
            return await asyncio.to_thread(score_windows, forward, tokenizer, spec, [("q", long_output)],
                                           tokens_per_batch=64)

    with pytest.raises(Cancelled):
        asyncio.run(gone_after_one_pass())
    assert len(passes) == 1
