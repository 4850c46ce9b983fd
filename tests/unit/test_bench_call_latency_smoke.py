"""The call-latency benchmark runs end to end in quick mode on tiny outputs (no timings checked: it only prints)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_call_latency_quick(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_call_latency", REPO / "tests" / "bench" / "bench_call_latency.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "rows.json"
    assert bench.main(["--quick", "--sizes", "3,40", "--backend", "bm25", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["output"], r["mode"]) for r in rows] == [("python -c pass", "floor"), ("hook alone", "hook")] + [
        (output, mode) for output in ("3 lines", "40 lines") for mode in ("raw", "cold", "first", "warm")]
    kept = {(r["output"], r["mode"]): r["kept"] for r in rows}
    assert kept[("3 lines", "warm")] == "passed through"  # below min_lines
    assert all(kept[("40 lines", mode)] == "4/40" for mode in ("cold", "first", "warm"))  # bm25 keeps 10%
    assert all(r["median_s"] > 0 for r in rows)
    printed = capsys.readouterr().out
    assert "x raw" in printed and "load" in printed
