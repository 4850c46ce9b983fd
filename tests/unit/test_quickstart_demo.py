"""The quickstart's demo: the shipped encoder answers the same pytest run as the served model, and the
summary prints both answers (issue 38 item 3). The encoder here is the real one, run as the quickstart
runs it (`squeez --backend encoder --strict`, in its own process)."""

from __future__ import annotations

from squeez_ray.quickstart import demo_answers, demo_tool_output, encoder_answer

FAILED_LINE = "FAILED test_inventory.py::test_reserve_pear - ValueError: not enough pear"


def test_the_encoder_answers_the_demo_with_the_failing_test_and_its_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUEEZ_STORE", str(tmp_path / "store"))  # squeez keeps the full output: not in ~/.cache
    tool_output, query = demo_tool_output(tmp_path / "demo")
    answer = encoder_answer(tool_output, query)
    kept = [line for line in answer.splitlines() if not line.startswith("[squeez:")]
    # pruned (--strict: a failure would have raised, not passed the whole output through) ...
    assert kept and len(kept) < len(tool_output.splitlines()) / 2, answer
    assert set(kept) <= set(tool_output.splitlines())  # verbatim lines of the run
    # ... and what it keeps names the failing test and why it failed
    assert any(line.startswith(FAILED_LINE) for line in kept), answer


def test_the_summary_prints_each_answer_under_its_pruner():
    text = demo_answers("which test failed and why", {
        "served model (squeez-pruner)": "test_inventory.py:17: \n_ _ _ _\n",
        "shipped encoder (squeez's default)": f"{FAILED_LINE}, need 1\n",
        "empty": ""})
    lines = text.splitlines()
    assert lines[0] == "    the answers to 'which test failed and why' on the pytest run:"
    served, encoder, empty = (lines.index(f"    {name}:") for name in
                              ("served model (squeez-pruner)", "shipped encoder (squeez's default)", "empty"))
    assert lines[served + 1:encoder] == ["    | test_inventory.py:17: ", "    | _ _ _ _"]
    assert lines[encoder + 1:empty] == [f"    | {FAILED_LINE}, need 1"]
    assert lines[empty + 1:] == ["    | (no lines kept)"]
