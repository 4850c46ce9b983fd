"""A call's time budget (issue 36 item 5): past its deadline the encoder stops scoring between window
batches and answers from what it scored, marked as such; a 20,000-line output under a tiny budget is
answered pruned (the cheap tier: the head-and-tail sample), never passed through unpruned."""

import subprocess

import numpy as np
import pytest
from test_cli_prune import SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.infer import budget as budget_mod
from squeez_ray.infer.budget import OVER_BUDGET, time_budget
from squeez_ray.infer.encoder.scoring import UNSCORED, score_encoded
from squeez_ray.infer.encoder.windows import WindowSpec

pytestmark = pytest.mark.unit


def _tokens():
    from squeez_ray.infer.encoder.tokens import LineTokenizer

    tokens = LineTokenizer.__new__(LineTokenizer)
    tokens.cls_id, tokens.sep_id, tokens.pad_id = 1, 2, 0
    return tokens


def _expiring_forward(calls: list, expire_at: int):
    """A fake scorer whose ``expire_at``-th batch takes the call past its deadline (no clock involved)."""

    def forward(ids, mask, types, owner, n_lines):
        calls.append(ids.shape[0])
        budget = budget_mod.current()
        if budget is not None and len(calls) == expire_at:
            budget.deadline = 0.0
        return np.full((ids.shape[0], n_lines), 0.7, dtype=np.float32)

    return forward


def test_the_deadline_stops_scoring_between_batches_and_says_which_lines_were_left():
    line_ids = [[5, 6, 7]] * 200  # 4 tokens a line: ~15 windows of 64 tokens, one batch each
    calls, missed = [], []
    with time_budget(60.0) as budget:
        scores = score_encoded(_expiring_forward(calls, 2), _tokens(), WindowSpec(max_length=64),
                               [([9], line_ids, None)], tokens_per_batch=1, missed=missed)
    assert budget.cut and len(calls) == 2, "scoring must stop after the batch that used up the budget"
    left = missed[0]
    assert 0 < left.sum() < 200
    assert np.allclose(scores[0][left], UNSCORED) and np.allclose(scores[0][~left], 0.7)

    calls.clear(), missed.clear()
    scores = score_encoded(_expiring_forward(calls, 2), _tokens(), WindowSpec(max_length=64),
                           [([9], line_ids, None)], tokens_per_batch=1, missed=missed)
    assert len(calls) > 2 and not missed[0].any() and np.allclose(scores[0], 0.7)  # no budget: every window


def _log(n_lines: int) -> str:
    """A pytest -v log of ``n_lines`` lines, its one failure in the middle and the summary last."""
    lines = [f"tests/test_mod{i % 40}.py::test_case_{i} PASSED" for i in range(n_lines - 8)]
    lines[len(lines) // 2:len(lines) // 2] = ["=" * 30 + " FAILURES " + "=" * 30, "_" * 20 + " test_parse " + "_" * 20,
                                              ">       assert parse('a.toml').retries == 3",
                                              "E       AssertionError: assert 5 == 3",
                                              "tests/test_config.py:42: AssertionError", ""]
    return "\n".join(lines + ["FAILED tests/test_config.py::test_parse - AssertionError: assert 5 == 3",
                              f"===== 1 failed, {n_lines - 8} passed in 12.34s ====="])


@pytest.fixture(scope="module")
def shipped():
    from squeez_ray.infer.registry import build_pruner

    pruner = build_pruner("encoder", engine_kwargs={"decoder": "lines", "shortlist_tokens": 0})
    pruner.tokens_per_batch = 512  # one window a batch: the budget can stop between any two
    return pruner


def test_a_pruner_cut_by_its_budget_answers_from_what_it_scored_and_says_so(shipped):
    output = _log(200)  # every line scored: several windows
    forward, calls = shipped._forward, []
    expire = _expiring_forward(calls, 1)

    def slow(ids, mask, types, owner, n_lines):
        expire(ids, mask, types, owner, n_lines)
        return forward(ids, mask, types, owner, n_lines)

    shipped._forward = slow
    try:
        with time_budget(60.0):
            cut = shipped.prune("which test failed and why", output)
        whole = shipped.prune("which test failed and why", output)
    finally:
        shipped._forward = forward
    assert cut.pruned and OVER_BUDGET in cut.reason and "lines not scored" in cut.reason
    assert OVER_BUDGET not in (whole.reason or "")
    assert cut.kept_lines <= whole.kept_lines


def test_a_20000_line_output_under_a_tiny_budget_is_answered_pruned_and_marked(env, tmp_path):  # noqa: F811
    data = _log(20_000).encode()
    out = subprocess.run([str(SQUEEZ), "--budget", "0.001", "which test failed and why"], input=data,
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    footer = out.stdout.decode().rstrip("\n").rsplit("\n", 1)[-1]
    assert footer.startswith("[squeez: kept ") and OVER_BUDGET in footer, (footer, out.stderr)
    assert "passed through" not in out.stderr.decode() and len(out.stdout) < len(data) / 10
