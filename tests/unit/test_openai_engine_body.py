"""The openai backend's request body: a user's engine kwargs add to the default, so the server never
tokenises the prompt with a second BOS (the prompt text already carries the family's prefix)."""

from __future__ import annotations

from squeez_ray.infer.openai_engine import OpenAIEngine


def test_engine_kwargs_keep_the_no_special_tokens_default():
    engine = OpenAIEngine("http://127.0.0.1:9", extra_body={"top_k": 1})
    assert engine.extra_body == {"add_special_tokens": False, "top_k": 1}
    assert OpenAIEngine("http://127.0.0.1:9").extra_body == {"add_special_tokens": False}
    # a user who wants the server's special tokens says so explicitly
    assert OpenAIEngine("http://127.0.0.1:9", extra_body={"add_special_tokens": True}).extra_body == {
        "add_special_tokens": True}
