"""Tokenise + mask rules: the response is exactly the target the model must emit; truncation never cuts it."""

from __future__ import annotations

import numpy as np
import pytest

from squeez_ray.prompt import render_prompt, render_target
from squeez_ray.schema import read_examples
from squeez_ray.train.data import (IGNORE_INDEX, collate, encode_example, training_row,
                                   warn_without_chatml_tokens)
from squeez_ray.train.synthetic import synthetic_rows, write_jsonl


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from squeez_ray.train.tiny import save_tiny_tokenizer

    folder = tmp_path_factory.mktemp("tok")
    save_tiny_tokenizer(folder)
    return AutoTokenizer.from_pretrained(folder)


def _example(output_lines, spans, query="where is the error"):
    return {"instance_id": "x1", "query": query, "tool_output": "\n".join(output_lines),
            "gold_spans": [{"start_line": s, "end_line": e} for s, e in spans]}


def test_training_row_renders_the_kept_lines_verbatim():
    row = training_row(_example(["a", "  b  ", "c", "d"], [(2, 3)]))
    assert row["target"] == render_target(["  b  ", "c"])
    assert (row["first_gold"], row["last_gold"]) == (2, 3)
    negative = training_row(_example(["a", "b"], []))
    assert negative["target"] == render_target([]) and negative["first_gold"] == 0


def test_chatml_markers_are_single_tokens_or_a_warning(tokenizer, caplog):
    assert warn_without_chatml_tokens(tokenizer, "tiny") and not caplog.records

    class Splitting:  # a base whose vocabulary has no ChatML tokens
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text)))}

    assert not warn_without_chatml_tokens(Splitting(), "llama-like")
    assert "llama-like: the tokenizer splits <|im_start|>" in caplog.text


def test_loss_is_on_the_response_only(tokenizer):
    row = training_row(_example([f"line {i}" for i in range(30)], [(7, 8)]))
    enc = encode_example(tokenizer, row, max_seq_length=4096)
    assert enc.status == "ok" and enc.kept_output_lines == 30
    prompt = tokenizer.decode(enc.input_ids[:enc.prompt_len])
    assert prompt == render_prompt(row["query"], row["tool_output"])
    assert tokenizer.decode(enc.input_ids[enc.prompt_len:]) == row["target"] + "<|im_end|>"

    batch = collate({"input_ids": [np.array(enc.input_ids), np.array(enc.input_ids[:enc.prompt_len + 3])],
                     "prompt_len": [enc.prompt_len, enc.prompt_len]}, pad_id=tokenizer.pad_token_id)
    labels, mask = batch["labels"], batch["attention_mask"]
    assert (labels[0, :enc.prompt_len] == IGNORE_INDEX).all()
    assert labels[0, enc.prompt_len:].tolist() == enc.input_ids[enc.prompt_len:]
    # The shorter row is right-padded: no loss and no attention on padding.
    assert mask[1].sum().item() == enc.prompt_len + 3 and (labels[1, enc.prompt_len + 3:] == IGNORE_INDEX).all()
    assert (batch["input_ids"][1, enc.prompt_len + 3:] == tokenizer.pad_token_id).all()


def test_truncation_keeps_the_gold_block_and_the_whole_target(tokenizer):
    lines = [f"noise line number {i} with some words" for i in range(200)]
    row = training_row(_example(lines, [(120, 122)]))
    full = encode_example(tokenizer, row, max_seq_length=100_000)
    limit = len(full.input_ids) // 3
    cut = encode_example(tokenizer, row, max_seq_length=limit)
    assert cut.status == "truncated" and len(cut.input_ids) <= limit
    assert 3 <= cut.kept_output_lines < 200
    prompt = tokenizer.decode(cut.input_ids[:cut.prompt_len])
    for n in (120, 121, 122):
        assert lines[n - 1] in prompt
    assert tokenizer.decode(cut.input_ids[cut.prompt_len:]) == row["target"] + "<|im_end|>"
    # Trailing lines go first: nothing after the gold block is left once truncation reached it.
    assert lines[150] not in prompt


def test_drop_policy_and_hopeless_examples(tokenizer):
    lines = [f"noise {i}" for i in range(300)]
    row = training_row(_example(lines, [(1, 300)]))  # the target alone is longer than the limit
    assert encode_example(tokenizer, row, max_seq_length=200).status == "dropped"
    short = training_row(_example(lines, [(5, 5)]))
    assert encode_example(tokenizer, short, max_seq_length=300, overlong="drop").status == "dropped"
    assert encode_example(tokenizer, short, max_seq_length=300, overlong="truncate").status == "truncated"


def test_negative_examples_truncate_to_a_window_too(tokenizer):
    row = training_row(_example([f"noise line {i} here" for i in range(400)], []))
    enc = encode_example(tokenizer, row, max_seq_length=400)
    assert enc.status == "truncated" and len(enc.input_ids) <= 400
    assert tokenizer.decode(enc.input_ids[enc.prompt_len:]) == render_target([]) + "<|im_end|>"


def test_synthetic_rows_are_valid_project_rows(tmp_path):
    rows = synthetic_rows(40, filler_lines=5)
    path = write_jsonl(rows, tmp_path / "rows.jsonl")
    back = read_examples(path)
    assert len(back) == 40
    assert {r["split"] for r in back} == {"train", "dev"}
    assert any(r["is_irrelevant"] and not r["gold_spans"] for r in back)
    # Train and dev never share a repository.
    train_repos = {r["repo"] for r in back if r["split"] == "train"}
    assert not train_repos & {r["repo"] for r in back if r["split"] == "dev"}
