"""The one job runner (squeez_ray/runner.py): every shipped config loads and validates, every job
answers --help with its config fields, and errors become one line with exit code 2."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from squeez_ray.runner import EXIT_USAGE, JobError, Outcome, field_help, job_parser, run_job

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "jobs" / "configs"


def _job(name: str):
    spec = importlib.util.spec_from_file_location(f"job_{name}", REPO / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config_classes() -> dict[str, type]:
    from squeez_ray.collect.pipeline import CollectConfig
    from squeez_ray.dataset.build import BuildConfig
    from squeez_ray.dataset.synthesize import SynthesizeConfig
    from squeez_ray.dataset.encoder_corpus import EncoderDataConfig
    from squeez_ray.train.encoder.run import EncoderTrainConfig
    from squeez_ray.label.job import LabelConfig
    from squeez_ray.quickstart import QuickstartConfig
    from squeez_ray.train.config import TrainConfig

    return {"bench_qwen35_2b_random": TrainConfig, "build_dataset": BuildConfig, "collect": CollectConfig,
            "encoder_data": EncoderDataConfig, "encoder_minilm": EncoderTrainConfig,
            "encoder_minilm_512": EncoderTrainConfig, "encoder_minilm_l3": EncoderTrainConfig,
            "encoder_v2": EncoderTrainConfig, "encoder_v3_l3": EncoderTrainConfig,
            "encoder_v3_l4_distill": EncoderTrainConfig, "encoder_v4": EncoderTrainConfig,
            "encoder_v4_l4_distill": EncoderTrainConfig, "label": LabelConfig,
            "quickstart_cpu": QuickstartConfig, "quickstart_tiny_cpu": QuickstartConfig,
            "quickstart_gpu": QuickstartConfig, "qwen35_2b_lora": TrainConfig, "qwen35_2b_lora_zero": TrainConfig,
            "synthesize": SynthesizeConfig, "tiny_cpu": TrainConfig, "gemma270m_lora_cpu": TrainConfig}


def test_every_shipped_config_loads_and_validates():
    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.dataset.synthesize import load_families
    from squeez_ray.runner import parse_flags

    classes = _config_classes()
    shipped = {p.stem for p in CONFIGS.glob("*.yaml")}
    # reprune's keys are its flags; synth_families is the data synthesize reads (families=...)
    assert shipped == set(classes) | {"reprune", "synth_families"}, "a new config: add it to this test"
    for name, cls in classes.items():
        try:
            load_config(cls, CONFIGS / f"{name}.yaml", [])
        except ConfigError as error:  # paths a config leaves to the command line (its header says which)
            assert [p for p in error.problems if not p.endswith(("required, no value given", ": required"))] == [], name
    assert load_families(CONFIGS / "synth_families.yaml")
    args = parse_flags(_job("reprune").build_parser(), ["--config", str(CONFIGS / "reprune.yaml"),
                                                        "--input", "in", "--output", "out"])
    assert args.input == "in" and args.backend  # the YAML's keys were all known flags


def _fields(cls: type, prefix: str = "") -> dict[str, str]:
    hints, helps, found = typing.get_type_hints(cls), field_help(cls), {}
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            found.update(_fields(hints[f.name], f"{prefix}{f.name}."))
        else:
            found[prefix + f.name] = helps[f.name]
    return found


@pytest.mark.parametrize("cls", sorted(set(_config_classes().values()), key=lambda c: c.__name__))
def test_every_config_field_has_help(cls):
    assert [key for key, text in _fields(cls).items() if not text] == []


@pytest.mark.parametrize("job, config", [("build_dataset", "build_dataset"), ("build_encoder_data", "encoder_data"),
                                         ("collect", "collect"), ("label", "label"), ("quickstart", "quickstart_cpu"),
                                         ("synthesize", "synthesize"), ("train", "tiny_cpu"),
                                         ("train_encoder", "encoder_v2")])
def test_job_help_lists_every_config_field(job, config):
    out = subprocess.run([sys.executable, str(REPO / "jobs" / f"{job}.py"), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert [key for key in _fields(_config_classes()[config]) if f"  {key} (default" not in out.stdout] == []


def test_errors_are_one_line_and_exit_2(tmp_path, capsys):
    @dataclasses.dataclass
    class Config:
        output_dir: str = "x"  # where it goes

    def work(config, args):
        raise JobError(f"{config.output_dir} is not writable")

    parser = job_parser("doc", Config)
    assert run_job("demo", work, ["output_dir=/nope"], parser=parser, config_cls=Config, logs=False) == EXIT_USAGE
    assert capsys.readouterr().err == "demo: /nope is not writable\n"
    assert run_job("demo", work, ["colour=red"], parser=parser, config_cls=Config, logs=False) == EXIT_USAGE
    assert "colour: unknown key" in capsys.readouterr().err


def test_summary_is_last_on_stdout_and_the_end_line_on_stderr(capsys):
    @dataclasses.dataclass
    class Config:
        n: int = 1  # how many

    code = run_job("demo", lambda c, a: Outcome(summary={"n": c.n}, manifest="m.json", exit_code=1), ["n=3"],
                   parser=job_parser("doc", Config), config_cls=Config, logs=False)
    out, err = capsys.readouterr()
    assert code == 1 and out == '{\n  "n": 3\n}\n'
    assert err.startswith("demo: finished with failures (exit 1) in ") and err.endswith("manifest: m.json\n")


def test_flag_jobs_take_a_config_and_key_value_words(tmp_path):
    config = tmp_path / "merge.yaml"
    config.write_text("out: merged\nverify_max_model_len: 512\n")
    from squeez_ray.runner import parse_flags

    job = _job("reprune")
    args = parse_flags(job.build_parser(), ["--input", "runs", "output=pruned", "workers=3",
                                            "engine_kwargs.max_model_len=4096"])
    assert (args.output, args.workers, args.engine_kwargs) == ("pruned", 3, {"max_model_len": 4096})
    args = parse_flags(job.build_parser(), ["--input", "runs", "--output", "p", "--workers", "2", "workers=5"])
    assert args.workers == 2  # a flag on the command line wins over a word
    with pytest.raises(SystemExit):
        parse_flags(job.build_parser(), ["--input", "runs"])  # --output missing everywhere
    out = subprocess.run([sys.executable, str(REPO / "jobs" / "merge.py"), "--config", str(config), "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "verify_max_model_len" in out.stdout
