"""Teacher reply parsing: every malformed reply maps to its named rejection reason."""

from __future__ import annotations

import pytest

from squeez_ray.label import parse
from squeez_ray.label.parse import Rejection, parse_query_reply, parse_spans_reply, parse_synth_reply


def test_query_reply_accepts_plain_fenced_and_wrapped_json():
    assert parse_query_reply('{"query": "Why does test_add fail?"}').query == "Why does test_add fail?"
    fenced = '```json\n{"query": "Where is parse_args defined?"}\n```'
    assert parse_query_reply(fenced).query == "Where is parse_args defined?"
    wrapped = '<think>the output is a test log</think>Here you go: {"query": "Which commit changed X?"} done.'
    assert parse_query_reply(wrapped).query == "Which commit changed X?"


def test_query_is_flattened_to_one_line():
    assert parse_query_reply('{"query": "  Which\\n test   fails? "}').query == "Which test fails?"


@pytest.mark.parametrize("reply,reason", [
    ("", parse.EMPTY_REPLY),
    (None, parse.EMPTY_REPLY),
    ("the query is: why", parse.INVALID_JSON),
    ('{"query": "unterminated', parse.INVALID_JSON),
    ('["a list"]', parse.NOT_AN_OBJECT),
    ('{"question": "wrong key"}', parse.MISSING_QUERY),
    ('{"query": 42}', parse.QUERY_NOT_STRING),
    ('{"query": "   "}', parse.EMPTY_QUERY),
    ('{"query": "' + "x" * 301 + '"}', parse.QUERY_TOO_LONG),
])
def test_query_rejections(reply, reason):
    result = parse_query_reply(reply, max_query_chars=300)
    assert isinstance(result, Rejection) and result.reason == reason


def test_spans_reply_forms_are_normalised():
    assert parse_spans_reply('{"spans": [[5, 6], [1, 2], [3, 3]]}', 10).spans == [(1, 3), (5, 6)]
    assert parse_spans_reply('{"spans": [{"start_line": 2, "end_line": 4}]}', 10).spans == [(2, 4)]
    assert parse_spans_reply('{"spans": [7, [9]]}', 10).spans == [(7, 7), (9, 9)]


@pytest.mark.parametrize("reply,reason", [
    ("{spans: [[1, 2]]}", parse.INVALID_JSON),
    ('{"lines": [[1, 2]]}', parse.MISSING_SPANS),
    ('{"spans": "1-2"}', parse.SPANS_NOT_LIST),
    ('{"spans": [[1, 2, 3]]}', parse.SPAN_MALFORMED),
    ('{"spans": [{"start": 1, "end": 2}]}', parse.SPAN_MALFORMED),
    ('{"spans": [["1", "2"]]}', parse.SPAN_NOT_INTEGER),
    ('{"spans": [[1.0, 2.0]]}', parse.SPAN_NOT_INTEGER),
    ('{"spans": [[true, 2]]}', parse.SPAN_NOT_INTEGER),
    ('{"spans": [[4, 2]]}', parse.SPAN_REVERSED),
    ('{"spans": [[0, 2]]}', parse.SPAN_OUT_OF_RANGE),
    ('{"spans": [[9, 11]]}', parse.SPAN_OUT_OF_RANGE),
    ('{"spans": []}', parse.EMPTY_SPANS),
])
def test_spans_rejections(reply, reason):
    result = parse_spans_reply(reply, 10, positive=True)
    assert isinstance(result, Rejection) and result.reason == reason, result


def test_empty_spans_are_fine_for_a_negative():
    assert parse_spans_reply('{"spans": []}', 10, positive=False).spans == []


def test_synth_reply():
    ok = parse_synth_reply('{"command": "npm ci", "tool_output": "a\\nb\\nc\\n"}', min_lines=3)
    assert ok.command == "npm ci" and ok.tool_output == "a\nb\nc"
    assert parse_synth_reply('{"command": "npm ci"}').reason == parse.MISSING_OUTPUT
    assert parse_synth_reply('{"tool_output": "one line"}', min_lines=3).reason == parse.OUTPUT_TOO_SHORT
    assert parse_synth_reply("npm ERR! code E404").reason == parse.INVALID_JSON


def test_every_reason_is_named_once():
    assert len(set(parse.REASONS)) == len(parse.REASONS)
