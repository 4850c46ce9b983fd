"""What the HTTP teacher sends: model, sampling, and the response_format a server can enforce."""

from __future__ import annotations

from squeez_ray.label import prompts
from squeez_ray.label.engines import HttpTeacherConfig
from squeez_ray.label.http_client import ChatClient


def payload(**settings):
    config = HttpTeacherConfig(url="http://127.0.0.1:1/v1", **settings)
    return ChatClient(config.chat_settings("k"))._payload(prompts.spans_messages("q", "grep", "grep -rn x", "a\nb"))


def test_defaults_and_pass_through():
    body = payload(extra_body={"reasoning_effort": "low"}, max_concurrency=8, num_actors=3)
    assert body["model"] == "openai/gpt-oss-120b" and body["temperature"] == 0.0 and body["max_tokens"] == 1024
    assert body["reasoning_effort"] == "low" and "response_format" not in body
    assert HttpTeacherConfig(max_concurrency=8, num_actors=3).chat_settings(None).max_concurrency == 3


def test_response_format_json_object_or_stage_schema():
    assert payload(json_mode=True)["response_format"] == {"type": "json_object"}
    schema = payload(json_schema=True)["response_format"]["json_schema"]["schema"]
    assert schema == prompts.spans_schema() and schema["required"] == ["spans"]
    config = HttpTeacherConfig(json_schema=True).chat_settings(None)
    query = ChatClient(config)._payload(prompts.query_messages("t", "grep", "c", "o", 300))
    assert query["response_format"]["json_schema"]["schema"] == prompts.QUERY_SCHEMA
    assert config.endpoint == "http://127.0.0.1:8000/v1/chat/completions"
