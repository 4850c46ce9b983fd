"""In-training evaluation on several workers: every rank generates its own shard of the dev sample and all
ranks end with the same scores (two real torch.distributed processes on gloo; generation is replaced by
a scripted reply, which is what this test is not about)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.train.evaluate import score_replies

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

_LINES = ["collected 12 items", "tests/test_io.py::test_read FAILED", "AssertionError: expected 3, got 4",
          "=== 1 failed, 11 passed in 0.52s ==="]
ROWS = [{"instance_id": f"ex{i}", "query": "which failed", "gold_spans": [[i % 3 + 1, i % 3 + 1]],
         "tool_output": "\n".join(_LINES)} for i in range(7)]


def _reply(row):
    from squeez_ray.prompt import render_target

    keep = 4 if row["instance_id"] in ("ex1", "ex3") else row["gold_spans"][0][0]  # two wrong answers on rank 1
    return render_target([row["tool_output"].splitlines()[keep - 1]])


_WORKER = r"""
import json, sys
import torch.distributed as dist
sys.path.insert(0, sys.argv[4])
from test_train_eval_ranks import ROWS, _reply
import squeez_ray.train.evaluate as ev
rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
seen = []
def fake_generate(model, tokenizer, rows, **kw):
    seen.extend(r["instance_id"] for r in rows)
    return [_reply(r) for r in rows]
ev.generate_replies = fake_generate
scores = ev.evaluate_generation(None, None, ROWS, system_prompt="", max_new_tokens=8, batch_size=2,
                                fuzzy_threshold=90.0, rank=rank, world=world)
print(json.dumps({"seen": seen, "scores": scores}))
dist.destroy_process_group()
"""


def test_every_rank_evaluates_its_shard_and_all_report_the_same_scores(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(rank), "2", str(store), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for rank in (0, 1)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    seen = [r["seen"] for r in results]
    assert seen == [["ex0", "ex2", "ex4", "ex6"], ["ex1", "ex3", "ex5"]]  # disjoint shards covering the sample
    expected = score_replies(ROWS, [_reply(r) for r in ROWS], fuzzy_threshold=90.0)
    assert results[0]["scores"] == results[1]["scores"] == pytest.approx(expected)
    assert 0 < expected["f1"] < 1


def test_the_eval_callback_runs_on_every_rank():
    from squeez_ray.config import load_config
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.loop import _callbacks

    class Rank1:
        rank, world = 1, 2

    cfg = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml", {"eval.enabled": True})
    callbacks = _callbacks(Rank1(), {"system_prompt": ""}, ROWS, cfg, None, 0, steps_per_epoch=2, resumed=False)
    assert any(type(c).__name__ == "EpochEval" for c in callbacks)
