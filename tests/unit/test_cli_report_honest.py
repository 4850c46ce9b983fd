"""`squeez report`'s honest savings: re-reads, `squeez show` calls as regret, the token counter, and
one-line errors for paths that are no stored runs. Real subprocesses over hand-made runs (BM25)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.cli.report import SHOW, Replay, Row, is_show_call, render_table, reread
from squeez_ray.cli.run import RunResult
from squeez_ray.cli.tokens import TokenizerError, resolve
from test_cli_report import report  # one way to run `squeez report` in a scratch HOME

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "RESULTS.md"  # the savings tables the README used to hold (issue 40)


def mini_run(path: Path, steps: list[tuple[str, str]]) -> Path:
    """A mini-swe-agent v1 trajectory (text format): the task, then (command, output) turns."""
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "<pr_description>fix the parser</pr_description>"}]
    for command, output in steps:
        messages.append({"role": "assistant", "content": f"THOUGHT: look at the parser.\n\n```bash\n{command}\n```"})
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>"})
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}, indent=2))
    return path


def _result(kept: int, *, fallback: bool = False, failure_lines: int = 0, pruned: bool = True) -> RunResult:
    return RunResult(b"", None, "id", pruned, kept, 100, failure_lines=failure_lines, fallback=fallback)


def test_reread_rule():
    assert reread(_result(0), "grep", [], set())  # kept nothing
    assert reread(_result(10, fallback=True), "grep", [], set(range(1, 11)))  # the sample is not an answer
    assert reread(_result(3, failure_lines=3), "test", [50], {50})  # only the safety net's lines
    assert reread(_result(5), "test", [50, 60], {1, 2, 3, 4, 5})  # misses every failure line
    assert not reread(_result(5), "test", [50, 60], {1, 2, 3, 4, 50})
    assert reread(_result(2), "read", [], {1, 2}) and not reread(_result(2), "grep", [], {1, 2})
    assert not reread(_result(3), "read", [], {1, 2, 3})
    assert not reread(_result(100, pruned=False), "read", [], set())  # passed through: read once


def test_show_calls_are_regret_that_costs_the_wrapped_savings():
    assert is_show_call("squeez show 3f2a --lines 10-20") and is_show_call("python -m squeez_ray.cli show 3f2a")
    assert not is_show_call("git show HEAD") and not is_show_call("squeez run q -- ls")
    replay = Replay(backend="bm25", tokens="characters / 4 (estimate)")
    replay.rows["read"] = Row(outputs=2, pruned=2, tokens_before=1000, tokens_after=100, reread=1,
                              reread_tokens=400)
    replay.rows[SHOW] = Row(outputs=1, tokens_before=100, tokens_after=100, reread=1, reread_tokens=100)
    table = render_table(replay)
    # wrapped: 1 - (100 + 400 re-read + 100 shown again) / 1000; over all outputs the show output is read once.
    assert "| **all wrapped** | 2 | 2 | 1,000 | 100 | 90% | 2 | 40% | - |" in table
    assert "| **all tool outputs** | 3 | 2 | 1,100 | 200 | 82% | 2 | 45% | - |" in table
    assert "`squeez show` calls in the runs: 1." in table


def test_report_counts_rereads_and_show_calls_in_a_stored_run(tmp_path):
    listing = "\n".join(f"parser line {i}" for i in range(1, 61))
    run = mini_run(tmp_path / "run.traj.json", [("cat src/parser.py", listing),
                                                 ("squeez show 3f2a9c --lines 5-9", "parser line 5\nparser line 6")])
    out = report(tmp_path, "--backend", "bm25", "--json", "--tokens", "chars", str(run))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["rows"][SHOW]["outputs"] == 1 and data["rows"][SHOW]["reread"] == 1
    assert data["tokens"] == "characters / 4 (estimate)"
    table = report(tmp_path, "--backend", "bm25", "--tokens", "chars", str(run)).stdout
    assert "| re-read | saved with re-reads |" in table and "`squeez show` calls in the runs: 1." in table


def test_tokens_come_from_a_real_tokenizer_when_given_one(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "parser": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    counter = resolve(str(tmp_path))
    assert counter.count("parser line 12") == 3 and "tokenizer" in counter.name
    assert resolve("chars").count("x" * 40) == 10
    with pytest.raises(TokenizerError, match="not a tokenizer file or folder"):
        resolve("no_such_encoding")
    run = mini_run(tmp_path / "run.traj.json", [("cat a.py", "\n".join(["parser line"] * 60))])
    out = report(tmp_path, "--backend", "bm25", "--json", "--tokens", str(tmp_path / "tokenizer.json"), str(run))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tokens"] == f"{tmp_path.name}/tokenizer.json tokenizer"
    bad = report(tmp_path, "--tokens", "nonsense", str(run))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--tokens nonsense" in bad.stderr


def test_paths_that_hold_no_runs_are_one_line_errors(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, words in (("/dev/null", "not a regular file or folder"),
                        (str(tmp_path / "fifo"), "not a regular file or folder"),
                        ("/proc/self", "the system's live view")):
        out = report(tmp_path, "--backend", "bm25", path)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and words in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def _results_savings() -> tuple[str, str]:
    """(the command docs/RESULTS.md shows for its savings table, the table with its last line)."""
    results = RESULTS.read_text()
    command = re.search(r"<!-- results: savings -->\s*```bash\n(.*?)```", results, re.DOTALL)
    table = re.search(r"^\| family \| outputs .*?^Runs read: [^\n]*$", results, re.DOTALL | re.MULTILINE)
    assert command and table, "docs/RESULTS.md lost its savings command or table"
    return command.group(1).strip(), table.group(0)


@pytest.mark.slow
def test_the_results_savings_table_is_the_output_of_the_command_it_shows(trajectories_dir):
    from squeez_ray.cli.tokens import resolve as resolve_tokens

    command, table = _results_savings()
    counted_with = re.search(r"Tokens: (.*?)\. Fallback", table).group(1)
    if resolve_tokens("auto").name != counted_with:
        pytest.skip(f"docs/RESULTS.md's tokens were counted with {counted_with}, not found on this machine")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}", SQUEEZ_DAEMON="0")
    out = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, env=env, timeout=900,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == table, f"docs/RESULTS.md's savings table is stale: run `{command}` and paste its output"


def test_the_results_tables_are_the_commands_output_shape():
    results = RESULTS.read_text()
    assert "squeez report --next-action ../shared/trajectories" in results
    header = render_table(Replay()).splitlines()[0]
    assert header in results
    footer = re.search(r"^Runs read: .*Backend: encoder\. Tokens: .*Fallback .*`squeez show` calls in the runs: \d+\.",
                       results, re.MULTILINE)
    assert footer, "docs/RESULTS.md's savings table is not the output of the command it shows"
    assert "| pruner | outputs | evidence items | items kept | share kept | lines kept |" in results
