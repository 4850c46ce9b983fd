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
                       "--quick", "--out", str(out)]) == 0
    variants = [row["variant"] for row in json.loads(out.read_text())["rows"]]
    assert len(variants) == 4 and variants[1] == "fp32" and "tiny" in variants[3]
    assert all(row["tokens"] > 0 and row["floor_s"] > 0 for row in json.loads(out.read_text())["rows"])
