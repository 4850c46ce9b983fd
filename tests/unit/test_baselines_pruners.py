"""The model-free baselines of METRICS.md section 4, resolved through backends.py names."""

from __future__ import annotations

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
