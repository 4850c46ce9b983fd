"""The model-free baselines of METRICS.md section 4, resolved through backends.py names."""

from __future__ import annotations

from pathlib import Path

import pytest

from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.infer.baselines import keep_count
from squeez_ray.infer.base import PruneRequest

OUTPUT = "\n".join(f"line {i} filler text" for i in range(1, 31))  # 30 lines -> keeps 3


@pytest.mark.parametrize("n,expected", [(1, 1), (4, 1), (5, 1), (15, 2), (25, 2), (30, 3), (35, 4), (2599, 260)])
def test_keep_count_is_max_one_round_tenth(n, expected):
    assert keep_count(n, 0.10) == max(1, round(0.10 * n)) == expected


def test_first_and_last_keep_the_ends():
    first = build_pruner("first").prune("q", OUTPUT, fail_open=False)
    last = build_pruner("last").prune("q", OUTPUT, fail_open=False)
    assert first.spans == [[1, 3]] and first.text == "line 1 filler text\nline 2 filler text\nline 3 filler text"
    assert last.spans == [[28, 30]] and last.pruned and last.model == "last"


def test_keep_ratio_option_is_used():
    result = build_pruner("first", BackendOptions(keep_ratio=0.5)).prune("q", OUTPUT, fail_open=False)
    assert result.kept_lines == 15


def test_bm25_keeps_the_lines_that_match_the_query_in_source_order():
    lines = [f"unrelated filler number {i}" for i in range(30)]
    lines[20] = "ERROR: connection refused by database"
    lines[7] = "database connection pool opened"
    lines[25] = "retrying connection"
    result = build_pruner("bm25").prune("why was the database connection refused", "\n".join(lines), fail_open=False)
    assert result.spans == [[8, 8], [21, 21], [26, 26]]  # all three matches, shown in source order


def test_bm25_without_any_matching_word_still_keeps_lines():
    result = build_pruner("bm25").prune("zebra", OUTPUT, fail_open=False)
    assert result.kept_lines == 3 and result.spans == [[1, 3]]  # equal scores: earliest lines


def test_random_is_seeded_and_independent_of_batch_order():
    requests = [PruneRequest("q", OUTPUT), PruneRequest("other", OUTPUT)]
    pruner = build_pruner("random", seed=7)
    alone = pruner.prune_batch(requests[1:], fail_open=False)[0].spans
    together = pruner.prune_batch(requests, fail_open=False)[1].spans
    assert alone == together and sum(e - s + 1 for s, e in alone) == 3
    assert build_pruner("random", seed=7).prune("q", OUTPUT).spans == pruner.prune("q", OUTPUT).spans
    seeds = {str(build_pruner("random", seed=s).prune("q", OUTPUT).spans) for s in range(10)}
    assert len(seeds) > 1


def test_keep_all_passes_everything_through_as_pruned():
    result = build_pruner("none").prune("q", "a\nb\n", fail_open=False)
    assert result.spans == [[1, 3]] and result.text == "a\nb\n" and result.pruned is True


def test_one_line_and_empty_outputs():
    for name in ("bm25", "first", "last", "random"):
        assert build_pruner(name).prune("q", "", fail_open=False).spans == [[1, 1]]
        assert build_pruner(name).prune("q", "only", fail_open=False).text == "only"


def test_bad_keep_ratio_is_refused():
    with pytest.raises(ValueError, match="keep_ratio"):
        build_pruner("first", keep_ratio=0.0)


def test_bm25_does_not_load_numba_but_a_later_import_still_works():
    """`squeez --backend bm25` start-up: bm25s's optional numba backend (0.2 s) stays unloaded."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from squeez_ray.infer.baselines import BM25Lines\n"
            "scores = BM25Lines().line_scores('parse config', ['we parse the config here', 'x = 1', 'nothing else'])\n"
            "assert scores[0] > scores[1], scores\n"
            "assert 'numba' not in sys.modules, 'bm25s loaded numba'\n"
            "import numba  # the mask is gone after the import: other code can still use numba\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def _bm25s_scores(query, lines):
    """The scores bm25s itself gives (how BM25Lines scored until it stopped importing it)."""
    import sys

    import numpy as np

    sys.modules.setdefault("numba", None)  # bm25s's numpy path, as BM25Lines used it
    import bm25s

    corpus = bm25s.tokenize(lines, return_ids=False, show_progress=False)
    if not any(corpus):
        return np.zeros(len(lines))
    retriever = bm25s.BM25(k1=1.5, b=0.75)
    retriever.index(corpus, show_progress=False)
    known = [t for t in bm25s.tokenize([query], return_ids=False, show_progress=False)[0] if t in retriever.vocab_dict]
    return np.asarray(retriever.get_scores(known), dtype=np.float64) if known else np.zeros(len(lines))


REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("query, source", [
    ("which test failed and why", "log"),
    ("where is the config parsed parse_config", "log"),
    ("the the the and", "log"),  # stop words only: nothing to rank
    ("make_result spans normalize", "squeez_ray/infer/base.py"),
    ("how is the budget of a call counted, and the deadline deadline", "squeez_ray/infer/budget.py"),
    ("install the hook claude code timeout", "docs/CLI.md"),
])
def test_bm25_scores_and_ranks_lines_exactly_as_bm25s(query, source):
    """The pure-Python BM25 (no numpy / scipy at start) is bm25s's variant to the bit, ties included."""
    import numpy as np

    from squeez_ray.infer.baselines import BM25Lines, bm25_line_scores

    if source == "log":
        lines = [f"tests/test_mod{i % 7}.py::test_case_{i} PASSED" for i in range(300)]
        lines[150:150] = ["E   AssertionError: parse_config('a.toml') failed", "", "FAILED tests/test_cfg.py::test_parse"]
    else:
        lines = (REPO_ROOT / source).read_text(encoding="utf-8").split("\n")
    ours = np.asarray(bm25_line_scores(query, lines))
    theirs = _bm25s_scores(query, lines)
    assert np.array_equal(ours, theirs)
    assert list(np.argsort(-ours, kind="stable")) == list(np.argsort(-theirs, kind="stable"))
    k = keep_count(len(lines), 0.10)
    chosen = BM25Lines().choose(PruneRequest(query, ""), lines, k)
    assert chosen == [int(i) + 1 for i in np.argsort(-theirs, kind="stable")[:k]]  # the lines bm25s would keep
