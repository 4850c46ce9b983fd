"""Never nothing on a positive: a model answer that kept no line becomes a bounded head-and-tail sample,
unless the output is clearly beside the query (it shares no content word with it).

The pure rule first, then through the real entry points (`squeez` and `squeez run`) with the
deterministic fake model (infer/fake.py), which keeps exactly the lines that hold a query word, so a
query can make it keep nothing.
"""

from __future__ import annotations

import json

import pytest
from test_cli_prune import env, squeez  # noqa: F401 - env is a fixture
from test_cli_run import run

from squeez_ray.cli.pruning import FALLBACK, SAMPLE_CHARS, beside_query, head_and_tail, never_empty
from squeez_ray.infer.base import PruneResult, RenderOptions

# A `git log`: the model (the fake) looks for "commits" and "landed", which no line holds verbatim.
GIT_LOG = "".join(f"commit {i:040x}\nAuthor: Dev <dev@example.com>\n\n    Fix parser case {i}\n\n"
                  for i in range(1, 13))
ON_TOPIC = "which commits landed"  # its stem "comm" is in the output: not beside it
BESIDE = "Which ReplicaSet scales the kubernetes deployment?"  # names a thing the output lacks, shares no word


def test_beside_query_is_a_one_sided_test():
    assert not beside_query(ON_TOPIC, GIT_LOG)
    assert beside_query(BESIDE, GIT_LOG)
    assert not beside_query("Which ReplicaSet fixed the parser?", GIT_LOG)  # a word in common: "parser"
    assert not beside_query("Is test_parser_case failing", "tests/a.py::test_parser_case FAILED")
    # A question in plain words names nothing: no output is beside it (the audit's empty answers).
    assert not beside_query("Check the repository layout", GIT_LOG)
    assert not beside_query("Run pytest after the fix", "....F.\n1 failed, 5 passed in 0.1s")
    # The hooks' query without a description is judged on its words, not on the command it quotes.
    assert not beside_query("the important lines of the output of: cat foo_bar.py", GIT_LOG)


def test_head_and_tail_is_bounded_in_lines_and_characters():
    lines = [f"line {i}" for i in range(1, 201)] + [""]  # a final newline: the empty piece is no line
    assert head_and_tail(lines) == [[1, 10], [191, 200]]
    assert head_and_tail([f"l{i}" for i in range(1, 21)]) == [[1, 5], [16, 20]]  # short: a quarter each end
    wide = ["x" * (SAMPLE_CHARS // 3)] * 100
    assert head_and_tail(wide) == [[1, 2], [99, 100]]  # a third line would pass SAMPLE_CHARS
    assert head_and_tail(["y" * (SAMPLE_CHARS + 1)] * 40) == []  # lines are never cut: no sample


def _empty(total: int) -> PruneResult:
    return PruneResult(spans=[], kept_lines=0, total_lines=total, text="", pruned=True, reason=None)


def test_never_empty_fills_only_an_empty_answer_on_an_output_near_the_query():
    lines = GIT_LOG.split("\n")
    result = never_empty(_empty(len(lines)), ON_TOPIC, GIT_LOG, RenderOptions(markers=True))
    assert result.reason == FALLBACK and result.spans == [[1, 10], [51, 60]] and result.kept_lines == 20
    assert result.text.splitlines()[10] == "... [40 lines omitted]"
    assert never_empty(_empty(len(lines)), BESIDE, GIT_LOG, RenderOptions()).spans == []
    kept = PruneResult(spans=[[3, 3]], kept_lines=1, total_lines=len(lines), text="x", pruned=True)
    assert never_empty(kept, ON_TOPIC, GIT_LOG, RenderOptions()).spans == [[3, 3]]  # the model's own answer


def test_the_pipe_answers_a_sample_and_says_so(env):  # noqa: F811
    out = squeez(["--backend", "fake", ON_TOPIC], GIT_LOG.encode(), env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.decode().splitlines()
    assert lines[:2] == ["commit " + f"{1:040x}", "Author: Dev <dev@example.com>"]
    assert "kept 20 of 61 lines (fake, fallback: head and tail: the model kept none)" in lines[-1]  # the pipe counts the final empty piece
    data = json.loads(squeez(["--backend", "fake", "--json", ON_TOPIC], GIT_LOG.encode(), env).stdout)
    assert data["reason"] == FALLBACK and data["kept_lines"] == 20

    beside = squeez(["--backend", "fake", BESIDE], GIT_LOG.encode(), env)
    assert beside.returncode == 0 and "no lines matched the query; 0 of 61 lines kept" in beside.stdout.decode()
    assert FALLBACK not in beside.stdout.decode()


@pytest.mark.parametrize("query, fallback", [(ON_TOPIC, True), (BESIDE, False)])
def test_squeez_run_answers_a_sample_on_a_positive(env, tmp_path, query, fallback):  # noqa: F811
    (tmp_path / "log.txt").write_text(GIT_LOG)
    out = run(["--backend", "fake", query, "--", "cat", str(tmp_path / "log.txt")], env)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert (FALLBACK in text.splitlines()[-1]) is fallback
    assert ("Fix parser case 1\n" in text) is fallback and ("Fix parser case 12\n" in text) is fallback
