"""The vLLM teacher's engine actor, per row: a prompt over max_model_len, a reply cut at max_tokens and a
request the engine refuses are each that row's named drop, never the batch's. vLLM itself is stood in
for by a fake LLM here (the real engine runs in tests/integration/test_label_vllm.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from squeez_ray.label.engines import ENGINE_ERROR, PROMPT_TOO_LONG
from squeez_ray.label.http_client import REPLY_TRUNCATED
from squeez_ray.label.vllm_teacher import TeacherEngine


class Tokenizer:
    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        return "".join(m["content"] for m in messages)

    def __call__(self, text, add_special_tokens):
        return {"input_ids": text.split()}


class LLM:
    """Answers each prompt with its own words reversed; 'cut' runs out of tokens; 'refused' fails the batch."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, params, use_tqdm, tokenization_kwargs):
        assert tokenization_kwargs == {"add_special_tokens": False}  # the template wrote the BOS
        self.calls.append(list(prompts))
        if any("refused" in p for p in prompts):
            raise ValueError("the engine refused a request")
        return [SimpleNamespace(outputs=[SimpleNamespace(text=json.dumps({"query": p[::-1]}), token_ids=[0] * 7,
                                                         finish_reason="length" if "cut" in p else "stop")])
                for p in prompts]


def engine(monkeypatch) -> TeacherEngine:
    actor = TeacherEngine.__new__(TeacherEngine)  # without starting vLLM
    actor.llm, actor.tokenizer, actor.max_model_len = LLM(), Tokenizer(), 5
    monkeypatch.setattr(TeacherEngine, "_params", lambda self, request: request["max_tokens"])
    return actor


def request(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}], "schema": None, "temperature": 0.0, "max_tokens": 7}


def test_each_row_fails_alone_and_names_why(monkeypatch):
    actor = engine(monkeypatch)
    outcomes = actor.answer([request("fine"), request("one two three four five six"), request("cut"),
                             request("refused"), request("also fine")])
    assert outcomes[0] == (json.dumps({"query": "enif"}), "", "")
    assert outcomes[1][:2] == ("", PROMPT_TOO_LONG) and "6 tokens" in outcomes[1][2]
    assert outcomes[2][:2] == ("", REPLY_TRUNCATED) and "max_tokens=7" in outcomes[2][2]
    assert outcomes[3][:2] == ("", ENGINE_ERROR) and "refused" in outcomes[3][2]
    assert outcomes[4] == (json.dumps({"query": "enif osla"}), "", "")
    # one batch for the rows that fit; after it failed, one call per row to find the one that fails
    assert actor.llm.calls == [["fine", "cut", "refused", "also fine"], ["fine"], ["cut"], ["refused"], ["also fine"]]
