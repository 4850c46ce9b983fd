"""The quickstart's cost (issue 38 item 4): its summary says where the time went, stage by stage (the README
test checks a real run's summary.json carries every stage and prints this line), and its demo pytest run is
a plain one, not this repository's test configuration."""

from __future__ import annotations

from squeez_ray.quickstart import STAGES, demo_tool_output, stage_times


def test_the_line_names_every_stage_in_pipeline_order_then_the_total():
    seconds = {"total": 412.6, "evaluate": 85.2, "ray": 6.1, "data": 95.4, "train": 70.5, "merge": 15.3,
               "serve": 91.7, "prune": 21.0}
    assert stage_times(seconds) == ("    stage times: ray 6s, data 95s, train 70s, merge 15s, serve 92s, prune 21s, "
                                    "evaluate 85s; total 413s")
    assert STAGES == ("ray", "data", "train", "merge", "serve", "prune", "evaluate")


def test_a_stage_that_did_not_run_is_left_out():
    assert stage_times({"ray": 5.0, "data": 0.1, "total": 5.2}) == "    stage times: ray 5s, data 0s; total 5s"


def test_the_demo_run_is_its_own_pytest_project_not_this_repositorys(tmp_path):
    # runs/quickstart/demo sits inside the checkout: pytest would take pyproject.toml's addopts (xdist workers,
    # a durations list) into the output the user sees pruned
    inside = tmp_path / "repo"
    inside.mkdir()
    (inside / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--durations=25"\n')
    output, _ = demo_tool_output(inside / "runs" / "demo")
    assert "slowest 25 durations" not in output and "configfile: pyproject.toml" not in output, output
    assert f"rootdir: {inside / 'runs' / 'demo'}" in output
    assert "FAILED test_inventory.py::test_reserve_pear - ValueError" in output
