"""The offline next-action measure (trajectories/next_action.py) on a hand-made two-step run, and
`squeez report --next-action` over it (BM25, the real stored-run reader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from squeez_ray.trajectories import mini_swe_agent
from squeez_ray.trajectories.next_action import action_items, collect, evidence, kept_items

REPO = Path(__file__).resolve().parents[2]
# Step 1 greps for keep_attrs; the hit on line 25 says where; step 2 opens that file at that line.
GREP = ([f"xarray/tests/test_{i}.py:{i + 100}:    pass" for i in range(1, 25)]
        + ["xarray/core/options.py:42:    keep_attrs = _get_keep_attrs(default)"]
        + [f"xarray/tests/test_{i}.py:{i + 200}:    pass" for i in range(25, 40)])
FIRST, SECOND = "grep -rn keep_attrs xarray/", "sed -n 42,60p xarray/core/options.py"


def two_step_run(path: Path) -> Path:
    """A mini-swe-agent v1 trajectory (its text format): the task, two THOUGHT + bash turns, their outputs."""
    def turn(thought: str, command: str) -> dict:
        return {"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"}

    def output(text: str) -> dict:
        return {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{text}\n</output>"}

    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "<pr_description>keep_attrs is ignored</pr_description>"},
                turn("Find where keep_attrs is read.", FIRST), output("\n".join(GREP)),
                turn("Open the options module at the hit.", SECOND), output("def _get_keep_attrs(default):\n    ...")]
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}, indent=2))
    return path


def test_action_items_are_paths_tests_identifiers_and_numbers():
    items = action_items("pytest tests/test_api.py::TestClient::test_get_ok -x && sed -n 120,140p src/app.py "
                         "&& python -c 'import requests.adapters.HTTPAdapter' # the fix")
    assert {"tests/test_api.py", "TestClient", "test_get_ok", "src/app.py", "HTTPAdapter", "#120", "#140"} <= items
    assert not items & {"pytest", "python", "import", "the", "fix", "sed", "requests"}  # plain words: everywhere


def test_evidence_is_what_the_next_action_typed_that_the_output_shows(tmp_path):
    found = evidence("\n".join(GREP), [SECOND], FIRST)
    # keep_attrs was in the agent's own grep: it knew it before reading the output, so it is no evidence.
    assert found == {"xarray/core/options.py": [25], "#42": [25]}
    assert kept_items(found, [[20, 30]]) == 2 and kept_items(found, [[1, 10], [26, 39]]) == 0

    observations = mini_swe_agent.iter_observations(mini_swe_agent.load(two_step_run(tmp_path / "run.traj.json")))
    [first] = collect(observations)  # the second output has no later action: nothing to measure
    assert first.observation.args == FIRST and first.items == found


def test_report_next_action_prints_the_shares(tmp_path):
    run = two_step_run(tmp_path / "run.traj.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(REPO), SQUEEZ_DAEMON="0")
    out = subprocess.run([sys.executable, "-m", "squeez_ray.cli", "report", "--next-action", "--backend", "bm25",
                          "--json", str(run)], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    rows = {row["pruner"]: row for row in json.loads(out.stdout)["rows"]}
    assert set(rows) == {"bm25", "pass-through"}
    assert rows["pass-through"]["items"] == 2 and rows["pass-through"]["share"] == 1.0
    assert rows["bm25"]["items"] == 2 and 0 <= rows["bm25"]["kept"] <= 2 and rows["bm25"]["lines_kept"] < 40
    table = subprocess.run([sys.executable, "-m", "squeez_ray.cli", "report", "--next-action", "--backend", "bm25",
                            str(run)], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert table.stdout.startswith("| pruner | outputs | evidence items | items kept | share kept | lines kept |")
    assert "| pass-through (1.0 by definition) | 1 | 2 | 2 | 1.00 | 100% |" in table.stdout
