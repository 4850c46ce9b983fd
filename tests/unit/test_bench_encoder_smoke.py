"""The encoder benchmark runs end to end on a tiny encoder (no timings checked: it only prints)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_encoder_prints_every_variant(tmp_path, capsys, public_cases_path):
    from squeez_ray.testing.tiny_encoder import build_tiny_encoder

    model = build_tiny_encoder(tmp_path / "tiny")
    cases = tmp_path / "cases.jsonl"  # three of the public cases, small ones, to keep it quick
    public = public_cases_path.read_text().splitlines()
    cases.write_text("\n".join(sorted(public, key=len)[:3]) + "\n")
    spec = importlib.util.spec_from_file_location("bench_encoder", REPO / "tests" / "bench" / "bench_encoder.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "rows.json"
    assert bench.main(["--model", str(model), "--compare", str(model), "--data", str(cases), "--threads", "1",
                       "--quick", "--matmul-n", "256", "--out", str(out)]) == 0
    variants = [row["variant"] for row in json.loads(out.read_text())["rows"]]
    assert len(variants) == 4 and variants[1] == "fp32" and "tiny" in variants[3]
    assert all(row["tokens"] > 0 and row["floor_s"] > 0 for row in json.loads(out.read_text())["rows"])


def test_bench_encoder_runtime_prints_cold_warm_and_the_extra_model(tmp_path, public_cases_path):
    from squeez_ray.infer.encoder.model import EncoderSettings, load_scorer, save_scorer
    from squeez_ray.train.encoder.export import export_into_checkpoint
    from squeez_ray.testing.tiny_encoder import build_tiny_encoder

    model, tokenizer, _ = load_scorer(build_tiny_encoder(tmp_path / "base"))
    save_scorer(model, tokenizer, EncoderSettings(base_model="tiny"), tmp_path / "tiny-l2")
    export_into_checkpoint(tmp_path / "tiny-l2")  # a checkpoint with its ONNX files inside, like training's
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(sorted(public_cases_path.read_text().splitlines(), key=len)[:2]) + "\n")
    spec = importlib.util.spec_from_file_location("bench_runtime", REPO / "tests" / "bench" / "bench_encoder_runtime.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "rows.json"
    assert bench.main(["--onnx", str(tmp_path / "tiny-l2"), "--also", str(tmp_path / "tiny-l2"), "--data", str(cases),
                       "--threads", "1", "--runs", "1", "--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    commands = [row["command"] for row in result["cold"]]
    assert commands[-1] == "squeez --model tiny-l2 (ONNX)" and all(row["first_output_s"] > 0 for row in result["cold"])
    variants = [row["variant"] for row in result["rows"]]
    assert variants == ["onnx int8", "onnx float32", "onnx int8 tiny-l2"]
    assert result["rows"][2]["floor_s"] > 0  # FLOPs from the checkpoint's config.json
