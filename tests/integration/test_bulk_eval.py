"""The Ray Data form of ``squeez eval`` gives the single-machine numbers, and resumes per system."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.evaluate.bulk import PARTS_DIR, BulkSettings, evaluate_bulk
from squeez_ray.evaluate.local import SystemSpec, evaluate_to_dir

SYSTEMS = [SystemSpec.parse("bm25"), SystemSpec.parse("first=first-10%")]
TIMING = {"latency_ms"}  # wall-clock fields differ between any two runs


def _rows(path):
    rows = pq.read_table(path).to_pylist()
    return sorted(({k: v for k, v in r.items() if k not in TIMING} for r in rows),
                  key=lambda r: (r["system"], r["example_index"]))


def _strip_timing(value):
    if isinstance(value, dict):
        return {k: _strip_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def test_two_systems_on_ray_data_match_squeez_eval_and_resume(ray_local, public_cases_path, tmp_path):
    local = evaluate_to_dir(public_cases_path, SYSTEMS, tmp_path / "local", options=BackendOptions())
    bulk_out = tmp_path / "bulk"
    bulk = evaluate_bulk(public_cases_path, SYSTEMS, bulk_out, options=BackendOptions(),
                         bulk=BulkSettings(workers=2, batch_size=8), echo=False)
    assert _strip_timing(bulk["systems"]) == _strip_timing(local["systems"])
    assert bulk["n_examples"] == local["n_examples"] == 67
    assert _rows(bulk_out / "per_example.parquet") == _rows(tmp_path / "local" / "per_example.parquet")
    for name in ("report.md", "recall_vs_compression.png", "metrics.json"):
        assert (bulk_out / name).stat().st_size > 0
    manifest = json.loads((bulk_out / "manifest.json").read_text())
    assert manifest["config"]["mode"] == "ray"
    assert manifest["cost_per_system"]["bm25"]["examples_scored_this_run"] == 67

    # Lose some stored rows of one system (as if killed mid-run): only those examples are scored again.
    parts = sorted((bulk_out / PARTS_DIR / "first-10_").rglob("part-*.jsonl"))
    lost = sum(len(p.read_text().splitlines()) for p in parts[:2])
    for part in parts[:2]:
        part.unlink()
    again = evaluate_bulk(public_cases_path, SYSTEMS, bulk_out, options=BackendOptions(),
                          bulk=BulkSettings(workers=1, batch_size=8), echo=False)
    costs = json.loads((bulk_out / "manifest.json").read_text())["cost_per_system"]
    assert costs["bm25"]["examples_scored_this_run"] == 0
    assert costs["first-10%"]["examples_scored_this_run"] == lost > 0
    assert _strip_timing(again["systems"]) == _strip_timing(local["systems"])
    assert _rows(bulk_out / "per_example.parquet") == _rows(tmp_path / "local" / "per_example.parquet")


class ScriptedChat(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/completions that keeps the output lines sharing a word with the
    query (a deterministic stand-in for a model), and records how many requests were in flight."""

    lock = threading.Lock()
    in_flight = 0
    peak = 0
    calls = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.calls += 1
            cls.peak = max(cls.peak, cls.in_flight)
        try:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            user = body["prompt"]
            query = user.split("<query>\n", 1)[1].split("\n</query>", 1)[0]
            output = user.split("<tool_output>\n", 1)[1].rsplit("\n</tool_output>", 1)[0]
            words = {w.lower() for w in re.findall(r"\w{5,}", query)}
            kept = [line for line in output.split("\n") if words & {w.lower() for w in re.findall(r"\w{5,}", line)}]
            time.sleep(0.02)  # long enough for requests to overlap
            reply = "<relevant_lines>\n" + "\n".join(kept[:5]) + "\n</relevant_lines>"
            payload = json.dumps({"id": "x", "object": "text_completion", "created": 0, "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "text": reply}],
                                  "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(reply) // 4,
                                            "total_tokens": 0}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        finally:
            with cls.lock:
                cls.in_flight -= 1


def test_an_openai_compatible_server_as_a_system_over_http(ray_local, public_cases_path, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        options = BackendOptions(server_url=f"http://127.0.0.1:{server.server_port}", server_model="scripted",
                                 max_context_tokens=32768, max_concurrency=2, timeout_s=30)
        systems = [SystemSpec.parse("openai=scripted-http")]
        local = evaluate_to_dir(public_cases_path, systems, tmp_path / "local", options=options, limit=20)
        ScriptedChat.peak = ScriptedChat.calls = 0
        bulk = evaluate_bulk(public_cases_path, systems, tmp_path / "bulk", options=options, limit=20,
                             bulk=BulkSettings(workers=2, batch_size=5), echo=False)
    finally:
        server.shutdown()
        server.server_close()
    assert ScriptedChat.calls >= 20  # every example went over HTTP (long outputs are chunked)
    assert 1 <= ScriptedChat.peak <= 2 * 2  # workers x max_concurrency bounds the requests in flight
    overall = bulk["systems"]["scripted-http"]["overall"]
    assert overall["n_unpruned"] == 0 and overall["recall"] > 0
    assert _strip_timing(bulk["systems"]) == _strip_timing(local["systems"])
    assert _rows(tmp_path / "bulk" / "per_example.parquet") == _rows(tmp_path / "local" / "per_example.parquet")
