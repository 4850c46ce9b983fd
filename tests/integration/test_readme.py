"""The README's two commands are the ones CI and newcomers run, so they are run here as written.

The README marks them with ``<!-- readme: setup-and-main -->`` and ``<!-- readme: setup-and-test -->``
just before their code blocks; ``.ci/run`` must run exactly the test command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_command(tag: str) -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(rf"<!-- readme: {tag} -->\s*```(?:bash|console|sh)?\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md has no code block marked <!-- readme: {tag} -->"
    lines = [line.removeprefix("$ ").strip() for line in match.group(1).strip().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    return " && ".join(lines)


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert readme_command("setup-and-test") in ci


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_readme_main_command_is_the_quickstart():
    command = readme_command("setup-and-main")
    assert "scripts/setup.sh" in command and "jobs/quickstart.py" in command


@pytest.mark.slow
def test_readme_main_command_runs_the_whole_pipeline():
    """Setup (idempotent here) then the main job, exactly as the README writes them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    run = subprocess.run(["bash", "-c", readme_command("setup-and-main")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=2400)  # a hang guard: ~10 min idle, 25+ on a loaded 2-core CI
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, tail
    for step in range(1, 8):
        assert f"=== [{step}/7]" in run.stdout, tail
    assert "NOTE: the served model is Gemma 3 270M" in run.stdout  # says what it is, and what it is not
    # The served path answers and prunes (an engine error or timeout fails open: pruned=False, every line kept),
    # through the endpoint and through `squeez --backend server` (on a loaded CPU its default 60 s timeout once
    # failed it open). How many lines the 270M model keeps of this one pytest run is not asserted: its choice
    # between the empty answer and a first line is a near tie (a logit margin of 0.02 on the d15474f run's
    # checkpoint), so CPU numerics flip it (CI kept 0/31, this laptop 2/31). Keeping the failing assertion
    # there is issue 38's open aim; the served model's quality is asserted below, over the evaluated outputs.
    endpoint = re.search(r"POST /v1/prune: kept (\d+)/(\d+) lines, pruned=True", run.stdout)
    assert endpoint and int(endpoint[1]) < int(endpoint[2]), tail
    piped = re.search(r"stderr: squeez: server kept (\d+)/(\d+) lines", run.stdout)
    assert piped and int(piped[1]) < int(piped[2]), tail
    # Evaluated on outputs it reads whole: one model call each, within the request timeout under CI load
    assert "test outputs fit the served context whole" in run.stdout, tail
    summary = json.loads((REPO / "runs" / "quickstart" / "summary.json").read_text())
    metrics = json.loads(Path(summary["metrics"]).read_text())
    assert {"squeez-pruner", "shipped-encoder", "bm25", "first", "last", "random"} <= set(metrics["systems"])
    # The served model is a trained language model that keeps real lines (issue 24), not a random one: over
    # the evaluated outputs its exact-line F1 is above the random baseline's (0.30 vs 0.08 on the d15474f run)
    served, chance = (metrics["systems"][name]["overall"] for name in ("squeez-pruner", "random"))
    assert served["n_unpruned"] == 0 and served["line_f1"] > chance["line_f1"], (served, chance)
    assert Path(summary["plot"]).stat().st_size > 0 and Path(summary["report"]).exists()
    # The summary shows the shipped encoder's answer beside the served model's, on the same pytest run
    answers = summary["demo"]["answers"]
    assert list(answers) == ["served model (squeez-pruner)", "shipped encoder (squeez's default)"], answers
    assert "    shipped encoder (squeez's default):" in run.stdout.split("=== [7/7]")[1], tail
    assert "FAILED test_inventory.py::test_reserve_pear - ValueError" in answers["shipped encoder (squeez's default)"]
    # Where the time went, stage by stage (issue 38 item 4): in summary.json and printed at its end
    from squeez_ray.quickstart import STAGES, stage_times

    seconds = summary["seconds"]
    assert set(STAGES) | {"total"} <= set(seconds) and all(v >= 0 for v in seconds.values()), seconds
    assert sum(seconds[s] for s in STAGES) <= seconds["total"] + 1, seconds
    assert stage_times(seconds) in run.stdout.split("=== [7/7]")[1], tail
    # Step 1 is jobs/sample_data.py's builder: the data it left is a real dataset training reads.
    check_sample_dataset(REPO / "runs" / "quickstart" / "data")


def check_sample_dataset(out: Path) -> None:
    """The sample dataset (real pytest / python / ruff / pip / git / grep runs on local sources, rule
    teacher): splits disjoint by repository, QA held, negatives, readable by training, resumable."""
    from squeez_ray.schema import read_examples
    from squeez_ray.train.data import load_rows, training_row

    manifest = json.loads((out / "manifest.json").read_text())
    splits = {s: read_examples(out / f"{s}.parquet") for s in ("train", "dev", "test")}
    assert sum(len(rows) for rows in splits.values()) >= 200, manifest["counts"]
    assert all(splits.values())
    everything = [r for rows in splits.values() for r in rows]
    tools = Counter(r["tool_type"] for r in everything if not r["is_irrelevant"])
    assert {"read_file", "grep", "test_output", "python", "git_log", "lint_output"} <= set(tools), tools
    negatives = [r for r in everything if r["is_irrelevant"]]
    assert negatives and all(r["gold_spans"] == [] and r["source"] == "synthetic_negative" for r in negatives)
    repos = {s: {r["repo"] for r in rows} for s, rows in splits.items()}
    assert not (repos["train"] & repos["dev"] or repos["train"] & repos["test"] or repos["dev"] & repos["test"])
    ids = [r["instance_id"] for r in everything]
    assert len(ids) == len(set(ids))  # squeez eval keys results by id
    for row in everything:  # QA held: at most half of an output kept, every output >= 5 lines
        n = len(row["tool_output"].split("\n"))
        kept = sum(s["end_line"] - s["start_line"] + 1 for s in row["gold_spans"])
        assert n >= 5 and kept * 2 <= n
    train = load_rows(str(out), "train", what="train")  # the folder is what training reads
    assert len(train) == len(splits["train"])
    assert all(training_row(r)["target"].startswith("<relevant_lines>") for r in train)
    failing = next(r for r in everything if r["tool_type"] == "test_output" and not r["is_irrelevant"])
    assert "fail" in failing["query"].lower()
    assert manifest["label_dropped"] and manifest["dropped"] is not None
    assert (out / "stats.md").read_text().count("|") > 20
    # jobs/sample_data.py on the same folder does nothing (resume), unless --overwrite
    again = subprocess.run([sys.executable, "jobs/sample_data.py", "--out", str(out)], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and json.loads((out / "manifest.json").read_text()) == manifest
