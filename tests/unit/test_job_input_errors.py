"""Bad settings are one clear error and exit 2, never a traceback (#28): the config layer's number
rules, deep YAML, output paths that are files, a mistyped local model path. Each runs a job's
``main()`` in-process: every case fails before Ray or a model would start."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEEP_YAML = "".join("  " * i + "a:\n" for i in range(3000)) + "  " * 3000 + "1\n"


def run(main, argv, capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.strip(), err
    return err


def train_main(argv, capsys, tmp_path) -> str:
    from jobs_train import main

    return run(main, ["--config", str(REPO / "jobs/configs/tiny_cpu.yaml"), f"data.train_path={tmp_path}",
                      f"run.storage_path={tmp_path / 'runs'}", *argv], capsys)


@pytest.fixture(autouse=True)
def _jobs_importable(monkeypatch):
    import importlib.util
    import sys

    for name in ("train", "label", "reprune", "evaluate"):
        spec = importlib.util.spec_from_file_location(f"jobs_{name}", REPO / "jobs" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, f"jobs_{name}", module)


@pytest.mark.parametrize("override, expected", [
    ("train.learning_rate=.inf", "train.learning_rate: expected a finite number, got inf"),
    ("train.learning_rate=.nan", "train.learning_rate: expected a finite number"),
    ("train.learning_rate=abc", "train.learning_rate: expected a number, got 'abc'"),
    ("train.max_grad_norm=-1", "train.max_grad_norm"),
])
def test_train_bad_numbers(override, expected, capsys, tmp_path):
    assert expected in train_main([override], capsys, tmp_path)


def test_train_paths_and_model(capsys, tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    err = train_main([f"run.storage_path={afile}"], capsys, tmp_path)
    assert f"run.storage_path: {afile} is a file" in err
    err = train_main([f"run.storage_path={afile}/runs"], capsys, tmp_path)
    assert "which is a file" in err
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)  # runs/ is a folder here: runs/typo is a mistyped path, not a hub id
    err = train_main(["model.base=runs/typo"], capsys, tmp_path)
    assert "model.base: runs/typo is no checkpoint directory" in err
    nobase = tmp_path / "nobase.yaml"
    nobase.write_text((REPO / "jobs/configs/tiny_cpu.yaml").read_text().replace("  base: tiny-qwen3\n", ""))
    from jobs_train import main

    assert "model.base: required" in run(main, ["--config", str(nobase)], capsys)


def test_deep_yaml_configs_are_one_error(capsys, tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text(DEEP_YAML)
    from jobs_label import main as label
    from jobs_train import main as train

    assert "nested too deeply" in run(train, ["--config", str(deep)], capsys)
    assert "nested too deeply" in run(label, ["--config", str(deep)], capsys)
    from squeez_ray.cli.eval import main as evaluate

    with pytest.raises(SystemExit) as exit_:  # flag-driven jobs: argparse's usage error, exit 2
        evaluate(["--config", str(deep)], prog="jobs/evaluate.py")
    assert exit_.value.code == 2 and "nested too deeply" in capsys.readouterr().err


@pytest.mark.parametrize("override, expected", [
    ("chunk_size=abc", "chunk_size: expected an integer, got 'abc'"),
    ("limit=-1", "limit: -1 must not be negative"),
    ("teacher.http.timeout_s=.inf", "teacher.http.timeout_s: expected a finite number"),
])
def test_label_bad_numbers(override, expected, capsys, tmp_path):
    from jobs_label import main

    err = run(main, ["--config", str(REPO / "jobs/configs/label.yaml"), f"observations={tmp_path}",
                     f"output_dir={tmp_path / 'out'}", override], capsys)
    assert expected in err


def test_label_output_dir_that_is_a_file(capsys, tmp_path):
    from jobs_label import main

    afile = tmp_path / "afile"
    afile.write_text("x")
    err = run(main, ["--config", str(REPO / "jobs/configs/label.yaml"), f"observations={tmp_path}",
                     f"output_dir={afile}"], capsys)
    assert f"output_dir: {afile} is a file" in err


@pytest.mark.parametrize("argv, expected", [
    (["--max-query-chars", "-5"], "--max-query-chars: -5 must not be negative"),
    (["max_query_chars=-5"], "--max-query-chars: -5 must not be negative"),
    (["--cpus-per-worker", "inf"], "--cpus-per-worker: expected a finite number"),
])
def test_reprune_flags_are_checked(argv, expected, capsys, tmp_path):
    from jobs_reprune import main

    with pytest.raises(SystemExit) as exit_:
        main(["--input", str(tmp_path), "--output", str(tmp_path.parent / "out"), *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and expected in err and "Traceback" not in err


def test_an_os_error_at_the_top_of_a_job_is_one_line(capsys):
    import argparse

    from squeez_ray.runner import Outcome, run_job

    def work(args) -> Outcome:
        raise NotADirectoryError(20, "Not a directory", "/data/out/x")

    assert run_job("demo", work, [], parser=argparse.ArgumentParser()) == 2
    assert capsys.readouterr().err.strip() == "demo: /data/out/x: Not a directory"


def test_a_nan_loss_stops_training_before_its_checkpoint(tmp_path):
    from types import SimpleNamespace

    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.loop import NonFiniteTraining, _callbacks

    reports = []
    session = SimpleNamespace(rank=0, report=lambda metrics, **kw: reports.append((metrics, kw)))
    cfg = SimpleNamespace(train=SimpleNamespace(learning_rate=math.inf))
    [report] = _callbacks(session, {}, None, cfg, None, 0, 10, False)
    state = SimpleNamespace(global_step=3, max_steps=10, epoch=0.3, num_input_tokens_seen=100)
    report.on_train_begin(None, state, None)
    report.on_log(None, state, None, logs={"loss": 1.5, "grad_norm": 2.0})
    with pytest.raises(NonFiniteTraining, match="training diverged: step 3: grad_norm nan"):
        report.on_log(None, state, None, logs={"loss": 1.0, "grad_norm": math.nan})
    assert len(reports) == 1  # the NaN step reported nothing (so no checkpoint is tied to it)
    assert TrainConfig  # the config layer refuses lr=inf up front (test_train_bad_numbers)


def test_a_diverged_run_is_a_train_job_error():
    from squeez_ray.train.run import TrainJobError, _fit

    class Diverges:
        def fit(self):
            raise RuntimeError("Training failed:\nray.exceptions.RayTaskError(NonFiniteTraining): "
                               "training diverged: step 7: loss nan; lower train.learning_rate (now inf)\nmore")

    with pytest.raises(TrainJobError, match=r"^training diverged: step 7: loss nan; lower train.learning_rate"):
        _fit(Diverges())
