"""The HTTP teacher end to end: a scripted OpenAI-compatible server on 127.0.0.1 with fixed replies
(good, fenced, malformed JSON, out-of-range spans, empty spans, 429 then success, 500 then success,
always 503) -> labelling on a local Ray -> build -> Parquet the schema and the training code read."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from squeez_ray.label import prompts
from squeez_ray.label.engines import HttpTeacherConfig, http_engine, make_budget_actor
from squeez_ray.label.http_client import (
    BUDGET_EXHAUSTED,
    EMPTY_REPLY,
    HTTP_ERROR,
    REPLY_TRUNCATED,
    RETRIES_EXHAUSTED,
    ChatClient,
    ChatSettings,
    LocalBudget,
)
from squeez_ray.label.pipeline import TRANSPORT_REASONS, TeacherConfig, label_dataset

QUERY = {"ok": '{"query": "Which line reports the failure?"}',
         "fenced": '<think>a log</think>```json\n{"query": "Where is the error raised?"}\n```',
         "badjson": "Sure! The query would be: which line fails",
         "longquery": json.dumps({"query": "why " * 200})}
SPANS = {"ok": '{"spans": [[2, 3]]}', "outofrange": '{"spans": [[5, 99]]}', "strspans": '{"spans": [["1", "2"]]}',
         "nospanskey": '{"lines": [[1, 2]]}', "recover": '{"spans": []}', "noanswer": '{"spans": []}'}
RETRY = {"recover": '{"spans": [[4, 4]]}', "noanswer": '{"spans": []}'}
CASES = ["ok", "fenced", "badjson", "longquery", "outofrange", "strspans", "nospanskey", "recover", "noanswer",
         "ratelimited", "flaky", "down"]
LABELLED = {"ok", "fenced", "recover", "ratelimited", "flaky"}


# Reasoning models (gpt-oss, DeepSeek R1) as vLLM / OpenRouter answer them.
REASONING = {
    "thinking_ok": {"message": {"role": "assistant", "content": QUERY["ok"], "reasoning_content": "Let me see..."},
                    "finish_reason": "stop"},
    "thinking_cut": {"message": {"role": "assistant", "content": None, "reasoning_content": "Hmm " * 300},
                     "finish_reason": "length"},
    "reasoning_cut": {"message": {"role": "assistant", "content": None, "reasoning": "First, " * 300},
                      "finish_reason": "length"},
    "thinking_empty": {"message": {"role": "assistant", "content": None, "reasoning": "done"}, "finish_reason": "stop"},
}


class Scripted(BaseHTTPRequestHandler):
    calls: Counter = Counter()
    lock = threading.Lock()
    api_key: str | None = None

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body, headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            return self._send(404, '{"error": "no such route"}')
        if self.api_key and self.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send(401, '{"error": "bad key"}')
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system == prompts.SYNTH_SYSTEM:
            return self._send(200, completion(body, synthetic_output(user)))
        case = user.split("case=")[1].split()[0]
        with self.lock:
            self.calls[case] += 1
            n = self.calls[case]
        if case in REASONING:
            return self._send(200, json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                                               "choices": [{"index": 0, **REASONING[case]}]}))
        if case == "down" or (case == "flaky" and n == 1):
            return self._send(503 if case == "down" else 500, '{"error": "overloaded"}')
        if case == "ratelimited" and n == 1:
            return self._send(429, '{"error": "slow down"}', [("Retry-After", "0")])
        if system == prompts.QUERY_SYSTEM:
            content = QUERY.get(case, QUERY["ok"])
        elif system == prompts.RETRY_SYSTEM:
            content = RETRY.get(case, SPANS["ok"])
        else:
            content = SPANS.get(case, SPANS["ok"])
        self._send(200, completion(body, content))


def completion(body, content):
    return json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}]})


def synthetic_output(user):
    """The writer's reply: an npm-like log for family npm_like, an unusable reply for family broken."""
    if "Family: broken" in user:
        return "npm ERR! I forgot the JSON"
    lines = ["npm WARN deprecated inflight@1.0.6", "case=ok written", "npm ERR! code ERESOLVE",
             *[f"npm http fetch GET 200 https://registry.example/pkg{i} 12ms" for i in range(20)]]
    return json.dumps({"command": "npm install", "tool_output": "\n".join(lines)})


@pytest.fixture()
def server():
    Scripted.calls = Counter()
    Scripted.api_key = None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def observation(case, k=0):
    lines = ["$ make test", f"case={case} run {k}", "FAILED tests/test_x.py::test_y - AssertionError",
             "E   assert 1 == 2", "collected 3 items", "2 passed, 1 failed in 0.1s", "done"]
    return {"instance_id": f"inst-{case}-{k}", "repo": f"org/{case}", "tool_type": "test_output",
            "command": "pytest -q", "tool_output": "\n".join(lines), "exit_code": 1, "error": None,
            "background_task": "Fix the failing test."}


def fast(url, **extra):
    return HttpTeacherConfig(url=url, max_retries=2, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=10,
                             max_concurrency=4, batch_size=4, **extra)


# ------------------------------------------------------------------ the client alone (no Ray)


def run_client(settings, messages_list, budget=None):
    import asyncio

    async def go():
        async with ChatClient(settings, budget) as client:
            return await asyncio.gather(*(client.chat(m) for m in messages_list))
    return asyncio.run(go())


def messages(case):
    return prompts.query_messages("task", "test_output", "pytest", f"case={case}\nx", 300)


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_client_retries_429_and_5xx_then_gives_up_on_persistent_errors(server):
    settings = fast(server).chat_settings(None)
    ok, limited, flaky, down = run_client(settings, [messages(c) for c in ("ok", "ratelimited", "flaky", "down")])
    assert ok.reply == QUERY["ok"] and ok.attempts == 1
    assert limited.reply == QUERY["ok"] and limited.attempts == 2
    assert flaky.reply == QUERY["ok"] and flaky.attempts == 2
    assert down.reply is None and down.error == RETRIES_EXHAUSTED and down.attempts == 3 and "503" in down.detail


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_reasoning_replies_are_answers_or_content_drops_never_transport_failures(server):
    settings = ChatSettings(url=server, max_retries=2, backoff_base_s=0.01, timeout_s=10, max_tokens=1024)
    ok, cut, cut2, empty = run_client(settings, [messages(c) for c in ("thinking_ok", "thinking_cut", "reasoning_cut",
                                                                      "thinking_empty")])
    assert ok.reply == QUERY["ok"] and ok.error is None
    for outcome in (cut, cut2):
        # max_tokens spent on reasoning: named, asked once (not retried), and final (a rerun does not resend it)
        assert outcome.error == REPLY_TRUNCATED and outcome.attempts == 1
        assert "max_tokens=1024" in outcome.detail and "reasoning" in outcome.detail
    assert empty.error == EMPTY_REPLY and empty.attempts == 1
    assert not {REPLY_TRUNCATED, EMPTY_REPLY} & TRANSPORT_REASONS


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_client_budget_counts_every_attempt(server):
    settings = fast(server).chat_settings(None)
    budget = LocalBudget(3)
    outcomes = run_client(settings, [messages("ratelimited"), messages("ok"), messages("ok")], budget)
    assert sum(o.attempts for o in outcomes) == 3
    assert [o.error for o in outcomes].count(BUDGET_EXHAUSTED) == 1


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_client_sends_the_key_and_does_not_retry_a_401(server):
    Scripted.api_key = "secret"
    settings = fast(server).chat_settings(None)
    denied, = run_client(settings, [messages("ok")])
    assert denied.error == HTTP_ERROR and denied.attempts == 1 and "401" in denied.detail
    allowed, = run_client(fast(server).chat_settings("secret"), [messages("ok")])
    assert allowed.reply == QUERY["ok"]


# ------------------------------------------------------------------ the pipeline on Ray


def test_http_teacher_labels_and_counts_every_drop(server, ray_local, tmp_path):
    ray = ray_local
    teacher = TeacherConfig(engine="http", http=fast(server))
    engine = http_engine(teacher.http, None, make_budget_actor(None))
    outcome = label_dataset(ray.data.from_items([observation(c) for c in CASES]), teacher, engine)
    rows = {row["instance_id"]: row for row in outcome.dataset.iter_rows()}
    assert {i.split("-")[1] for i in rows} == LABELLED
    assert json.loads(rows["inst-ok-0"]["spans"]) == [[2, 3]]
    assert json.loads(rows["inst-recover-0"]["spans"]) == [[4, 4]] and rows["inst-recover-0"]["retried"]
    assert rows["inst-fenced-0"]["query"] == "Where is the error raised?"
    assert dict(outcome.dropped) == {"invalid_json": 1, "query_too_long": 1, "span_out_of_range": 1,
                                     "span_not_integer": 1, "missing_spans": 1, "empty_spans": 1,
                                     "retries_exhausted": 1}
    assert (outcome.retried, outcome.recovered_by_retry) == (2, 1)
    assert outcome.retry_later == [("inst-down-0", "pytest -q")]
    # query round: 12 rows (+1 for the 429, +1 for the 500, +2 retries for "down"); spans round: the 9
    # rows still in play after the query round; retry round: 2 rows
    assert outcome.teacher_requests == (12 + 1 + 1 + 2) + 9 + 2

    from squeez_ray.dataset.build import BuildConfig, build_from_examples
    from squeez_ray.dataset.qa import QAConfig
    from squeez_ray.label.stages import to_example
    from squeez_ray.schema import read_examples
    from squeez_ray.train.data import training_row

    examples = [to_example(row, "swe") for row in rows.values()]
    manifest = build_from_examples(examples, BuildConfig(output_dir=str(tmp_path), negatives_share=0.0,
                                                         qa=QAConfig(min_output_lines=5)))
    assert sum(manifest["counts"][s] for s in ("train", "dev", "test")) == len(LABELLED)
    loaded = read_examples(tmp_path)
    assert {r["instance_id"] for r in loaded} == set(rows)
    ok = next(r for r in loaded if r["instance_id"] == "inst-ok-0")
    assert ok["gold_spans"] == [{"start_line": 2, "end_line": 3}] and ok["source"] == "swe"
    assert training_row(ok)["target"] == ("<relevant_lines>\ncase=ok run 0\n"
                                          "FAILED tests/test_x.py::test_y - AssertionError\n</relevant_lines>")


def test_label_job_budget_then_resume(server, ray_local, tmp_path):
    from squeez_ray.label.job import LabelConfig, run_label
    from squeez_ray.schema import read_examples, write_observations

    observations = [observation("ok", k) for k in range(5)]
    write_observations(observations, tmp_path / "obs.parquet")
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps({"instance_id": o["instance_id"], "repo": "org/ok",
                                             "base_commit": "abcdef1", "problem_statement": "case=ok task"}) + "\n"
                                 for o in observations))
    config = LabelConfig(observations=str(tmp_path / "obs.parquet"), instances=str(instances),
                         output_dir=str(tmp_path / "out"), chunk_size=2,
                         teacher=TeacherConfig(engine="http", http=fast(server, request_budget=4)))
    first = run_label(config)  # part 1: 2 queries + 2 span requests; part 2 finds the budget spent
    assert first["counts"]["labelled"] == 2 and first["dropped"] == {"budget_exhausted": 2}
    assert first["counts"]["left_for_rerun"] == 2 and first["counts"]["not_started"] == 1
    config.teacher.http.request_budget = None
    second = run_label(config)
    assert second["counts"]["already_settled"] == 2 and second["counts"]["labelled"] == 3
    third = run_label(config)
    assert third["counts"]["to_label"] == 0
    labelled = read_examples(tmp_path / "out" / "labelled")
    assert sorted(r["instance_id"] for r in labelled) == sorted(o["instance_id"] for o in observations)
    assert {r["background_task"] for r in labelled} == {"case=ok task"}


def test_synthesize_writes_then_labels(server, ray_local, tmp_path):
    from squeez_ray.dataset.synthesize import SynthesizeConfig, synthesize
    from squeez_ray.schema import read_examples

    families = tmp_path / "families.yaml"
    families.write_text("families:\n"
                        "  - {name: npm_like, group: javascript, ecosystem: Node.js, tool: npm install,"
                        " tool_type: pip_install, scenarios: [a peer conflict, a 404]}\n"
                        "  - {name: broken, group: rust, ecosystem: Rust, tool: cargo build,"
                        " tool_type: build_output, scenarios: [anything]}\n")
    config = SynthesizeConfig(families=str(families), output_dir=str(tmp_path / "synth"), per_family=3,
                              teacher=TeacherConfig(engine="http", http=fast(server)))
    manifest = synthesize(config)
    assert manifest["counts"]["labelled"] == 3 and manifest["dropped"] == {"write:invalid_json": 3}
    rows = read_examples(tmp_path / "synth" / "labelled")
    assert {r["source"] for r in rows} == {"synthetic"}
    assert {r["split_group_id"] for r in rows} == {"synth-group:javascript"}
    assert sorted(r["instance_id"] for r in rows) == [f"synth:npm_like:{k:04d}" for k in range(3)]
    assert all(r["gold_spans"] == [{"start_line": 2, "end_line": 3}] and r["command"] == "npm install" for r in rows)
    again = synthesize(config)  # resume: the written npm rows are settled; broken ones are content failures
    assert again["counts"]["planned"] == 0
