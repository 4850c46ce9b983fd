"""The LoRA recipe on a real pretrained model (Gemma 3 270M, converted once per cache: see conftest's
gemma_270m_dir), the checks that random tiny models cannot make:

- the shipped CPU config's recipe learns: a few LoRA steps lower the answer loss on a small fixed set;
- the prompt the served pruner sends tokenises to the very ids training put before the answer
  (same bytes, ``<bos>`` once and first), and training's answer ends where serving stops;
- the merged checkpoint answers as the adapter on the base does (greedy).

One training run (in-process, no Ray: the loop is the one Ray Train workers run) serves all three.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from squeez_ray.config import load_config
from squeez_ray.prompt import IM_END, render_target
from squeez_ray.train.config import TrainConfig

# In-process training and tokenising, no Ray, Serve or vLLM: runs beside the cluster tests.
pytestmark = pytest.mark.no_cluster

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "jobs" / "configs" / "gemma270m_lora_cpu.yaml"

# A small fixed set: short real-looking tool outputs with the lines an agent needs.
CASES = [
    ("which test failed", "collected 3 items\ntests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\n"
     "tests/test_a.py::test_three PASSED\nE   AssertionError: assert 1 == 2\n1 failed, 2 passed in 0.12s", [3, 5]),
    ("where is parse_config defined", "src/app/cli.py:12:from app.config import parse_config\n"
     "src/app/config.py:40:def parse_config(path):\nsrc/app/config.py:88:    return parse_config(p)\n"
     "tests/test_config.py:5:from app.config import parse_config", [2, 2]),
    ("why did the install fail", "Collecting numpy\n  Using cached numpy-2.1.0.tar.gz\nBuilding wheels\n"
     "error: command 'gcc' failed: No such file or directory\nERROR: Failed building wheel for numpy\n"
     "Successfully installed pip-24.0", [4, 5]),
    ("what does the type checker report", "Success: no issues found in 3 source files\n"
     "app/models.py:17: error: Incompatible return value type (got \"str\", expected \"int\")\n"
     "Found 1 error in 1 file (checked 12 source files)", [2, 2]),
]


N_TRAIN = 2  # examples trained on (x2 repeats, 2 per step): each step is ~500 tokens on 2 cores


def _rows() -> list[dict]:
    return [{"instance_id": f"fixed-{i}", "query": q, "tool_output": out, "split": "train",
             "gold_spans": [{"start_line": a, "end_line": b}]} for i, (q, out, (a, b)) in enumerate(CASES[:N_TRAIN])]


def _answer_loss(model, tokenizer, rows, prefix: str) -> float:
    """Mean answer-token loss, computed here from the rendered bytes (not through the training data code)."""
    import torch

    from squeez_ray.prompt import render_prompt
    from squeez_ray.spans import kept_text, split_lines

    losses = []
    for row in rows:
        span = row["gold_spans"][0]
        kept = kept_text(split_lines(row["tool_output"]), [(span["start_line"], span["end_line"])]).split("\n")
        prompt = tokenizer(prefix + render_prompt(row["query"], row["tool_output"]), add_special_tokens=False)["input_ids"]
        answer = tokenizer(render_target(kept) + IM_END, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + answer])
        labels = ids.clone()
        labels[0, :len(prompt)] = -100
        with torch.no_grad():
            losses.append(float(model(input_ids=ids, labels=labels).loss))
    return sum(losses) / len(losses)


@pytest.fixture(scope="module")
def trained(gemma_270m_dir, tmp_path_factory):
    """A few LoRA steps of the shipped CPU config on the fixed set (in-process); ~1 minute on 2 cores."""
    from squeez_ray.train.in_process import train_in_process

    run = tmp_path_factory.mktemp("gemma-lora")
    config = load_config(TrainConfig, CONFIG, [
        f"model.base={gemma_270m_dir}", "train.max_steps=4", "train.learning_rate=0.001", "train.warmup_ratio=0",
        "train.lr_scheduler=constant", "train.logging_steps=1", "data.repeat=2", "train.per_device_batch_size=2",
        f"run.storage_path={run}",
        "run.name=fixed"])
    outcome = train_in_process(config, run, rows=_rows())
    assert outcome["checkpoints"], outcome
    return {"config": config, "checkpoint": outcome["checkpoints"][-1], "reports": outcome["reports"], "run": run}


def _base(gemma_270m_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(gemma_270m_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(gemma_270m_dir)


def test_a_few_lora_steps_lower_the_answer_loss(gemma_270m_dir, trained):
    from peft import PeftModel

    model, tokenizer = _base(gemma_270m_dir)
    before = _answer_loss(model, tokenizer, _rows(), "<bos>")
    tuned = PeftModel.from_pretrained(model, trained["checkpoint"]).eval()
    after = _answer_loss(tuned, tokenizer, _rows(), "<bos>")
    print(f"answer loss on the fixed set: base {before:.3f} -> after 4 LoRA steps {after:.3f}")
    # measured: 0.68 -> 0.38..0.46 (before the adapter init was seeded); with the loss on the prompt
    # instead of the answer (a broken mask) 0.68 -> 0.59
    assert after < 0.8 * before, (before, after)
    losses = [r["loss"] for r in trained["reports"] if "loss" in r]
    assert all(loss == loss for loss in losses) and losses[-1] < losses[0], losses


def test_the_served_prompt_is_the_trained_prompt(gemma_270m_dir):
    """Serve, the CLI and bulk evaluation render through GenerativePruner.prepare; training through
    TokenizeBatch. Same ids before the answer, <bos> exactly once and first; training's answer ends
    with a stop string the served requests carry."""
    from squeez_ray.infer.base import PruneRequest
    from squeez_ray.infer.generative import GenerativePruner
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT
    from squeez_ray.train.data import TokenizeBatch, training_row

    rows = _rows()
    served = GenerativePruner.for_prompting(gemma_270m_dir, BackendOptions(max_context_tokens=4096))
    prepared = served.prepare([PruneRequest(r["query"], r["tool_output"]) for r in rows])
    assert len(prepared.jobs) == len(rows)  # short outputs: one chunk each
    items = [training_row(r) for r in rows]
    tokenized = TokenizeBatch(str(gemma_270m_dir), 1536, "drop", DEFAULT_SYSTEM_PROMPT)(
        {key: [item[key] for item in items] for key in items[0]})
    tokenizer = served.engine.tokenizer
    for job, ids, prompt_len in zip(prepared.jobs, tokenized["input_ids"], tokenized["prompt_len"]):
        served_ids = tokenizer(job.prompt, add_special_tokens=False)["input_ids"]  # as vLLM is asked to
        assert served_ids == [int(t) for t in ids[:prompt_len]]
        assert served_ids[0] == tokenizer.bos_token_id and served_ids.count(tokenizer.bos_token_id) == 1
        answer = tokenizer.decode([int(t) for t in ids[prompt_len:]])
        assert any(answer.endswith(stop) for stop in job.stop), (answer, job.stop)


def test_the_merged_checkpoint_answers_as_the_adapter(gemma_270m_dir, trained):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from squeez_ray.model_family import GEMMA
    from squeez_ray.train.merge import merge_adapter

    out = trained["run"] / "merged"
    manifest = merge_adapter(trained["checkpoint"], out)
    assert manifest["model_family"] == "gemma"
    model, tokenizer = _base(gemma_270m_dir)
    adapter = PeftModel.from_pretrained(model, trained["checkpoint"]).eval()
    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()

    def greedy(m, query, output):
        ids = tokenizer(GEMMA.render_prompt(query, output), add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            new = m.generate(**ids, max_new_tokens=16, do_sample=False)[0, ids["input_ids"].shape[1]:]
        return tokenizer.decode(new)

    for query, output, _ in CASES[:2]:
        assert greedy(merged, query, output) == greedy(adapter, query, output)
    # Greedy text can agree by luck (a few steps move the answers little): the logits on a prompt +
    # answer must match the adapter's far more closely than the base's, or the merge dropped the adapter.
    query, output, (a, b) = CASES[0]
    text = GEMMA.render_prompt(query, output) + render_target(output.split("\n")[a - 1:b]) + IM_END
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = {name: m(input_ids=ids).logits for name, m in
                  (("merged", merged), ("adapter", adapter))}
        with adapter.disable_adapter():
            logits["base"] = adapter(input_ids=ids).logits
    merge_error = (logits["merged"] - logits["adapter"]).abs().max().item()
    adapter_shift = (logits["base"] - logits["adapter"]).abs().max().item()
    print(f"max logit difference: merged vs adapter {merge_error:.2e}, base vs adapter {adapter_shift:.2e}")
    assert merge_error < 0.05 * adapter_shift, (merge_error, adapter_shift)
