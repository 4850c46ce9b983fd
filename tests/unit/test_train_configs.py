"""Every shipped training config loads and validates (GPU ones included, without running them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squeez_ray.config import ConfigError, load_config
from squeez_ray.train.config import TrainConfig, deepspeed_stage

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "jobs" / "configs"


def _runs_training(path: Path) -> bool:
    header = [line for line in path.read_text().splitlines() if line.startswith("#")][:3]
    return any("jobs/train.py" in line for line in header)


TRAIN_CONFIGS = sorted(p for p in CONFIGS.glob("*.yaml") if _runs_training(p))


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # deepspeed paths are relative to the working directory, as under `ray job submit`


def test_the_shipped_training_configs_are_found():
    names = {p.stem for p in TRAIN_CONFIGS}
    assert {"tiny_cpu", "qwen35_2b_lora", "qwen35_2b_lora_zero", "bench_qwen35_2b_random"} <= names


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: p.stem)
def test_config_loads_validates_and_says_how_to_run_it(path):
    assert path.read_text().startswith("# ")
    config = load_config(TrainConfig, path)
    assert config.run.name and config.model.base


def test_paper_recipe():
    c = load_config(TrainConfig, CONFIGS / "qwen35_2b_lora.yaml")
    assert c.model.base == "Qwen/Qwen3.5-2B-Base"
    assert (c.lora.r, c.lora.alpha, c.lora.target_modules) == (16, 32, "all-linear")
    assert (c.data.max_seq_length, c.train.per_device_batch_size, c.train.gradient_accumulation_steps) == (20000, 8, 4)
    assert (c.train.learning_rate, c.train.warmup_ratio, c.train.weight_decay, c.train.epochs) == (2e-4, 0.05, 0.01, 3)
    assert c.train.bf16 and c.scaling.use_gpu and c.scaling.num_workers == 1


def test_zero_config_keeps_the_recipe_and_points_at_a_deepspeed_file():
    single = load_config(TrainConfig, CONFIGS / "qwen35_2b_lora.yaml")
    zero = load_config(TrainConfig, CONFIGS / "qwen35_2b_lora_zero.yaml")
    assert zero.lora == single.lora and zero.data.max_seq_length == single.data.max_seq_length
    assert deepspeed_stage(zero.train.deepspeed) == 2 and zero.scaling.num_workers > 1
    # Same global batch: per device x workers x accumulation.
    global_single = single.train.per_device_batch_size * single.scaling.num_workers * single.train.gradient_accumulation_steps
    global_zero = zero.train.per_device_batch_size * zero.scaling.num_workers * zero.train.gradient_accumulation_steps
    assert global_single == global_zero


@pytest.mark.parametrize("name,stage", [("deepspeed_zero2.json", 2), ("deepspeed_zero3.json", 3)])
def test_deepspeed_files(name, stage):
    data = json.loads((CONFIGS / name).read_text())
    assert data["zero_optimization"]["stage"] == stage
    # "auto" lets the HF Trainer fill batch sizes / accumulation from the YAML, so the two never disagree.
    assert data["train_micro_batch_size_per_gpu"] == "auto" and data["gradient_accumulation_steps"] == "auto"


def test_bench_architecture_is_qwen35_2b():
    """The random-weight bench model has the 2B architecture: built on the meta device, no memory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = load_config(TrainConfig, CONFIGS / "bench_qwen35_2b_random.yaml")
    fields = dict(c.model.architecture)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    assert config.layer_types.count("full_attention") == 6 and len(config.layer_types) == 24
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    assert 1.7e9 < params < 2.4e9, params
    assert c.data.max_seq_length == 20000 and c.model.random_init


def test_tiny_config_trains_the_vllm_servable_qwen3_on_two_cpu_workers():
    c = load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml")
    assert c.model.base == "tiny-qwen3" and c.scaling.num_workers == 2 and not c.scaling.use_gpu
    assert not c.train.bf16


def test_unknown_keys_and_bad_values_are_all_reported_at_once():
    with pytest.raises(ConfigError) as info:
        load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml",
                    ["lora.rank=8", "train.learning_rate=-1", "train.warmup_ratio=2", "scaling.num_workers=0"])
    text = str(info.value)
    for expected in ("lora.rank: unknown key", "learning_rate", "warmup_ratio", "num_workers"):
        assert expected in text
    assert len(info.value.problems) == 4


def test_cross_section_checks():
    with pytest.raises(ConfigError, match="ZeRO-3"):
        load_config(TrainConfig, CONFIGS / "qwen35_2b_lora_zero.yaml", ["train.deepspeed=jobs/configs/deepspeed_zero3.json"])
    with pytest.raises(ConfigError, match="needs eval.enabled"):
        load_config(TrainConfig, CONFIGS / "qwen35_2b_lora.yaml", ["eval.enabled=false"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml", ["train.deepspeed=nowhere.json"])
    with pytest.raises(ConfigError, match="use_cpu"):
        load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml",
                    ["train.deepspeed=jobs/configs/deepspeed_zero2.json", "train.use_cpu=false"])


def test_overrides_apply():
    c = load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml", ["train.max_steps=3", "run.name=other", "model.base=tiny-qwen35"])
    assert (c.train.max_steps, c.run.name, c.model.base) == (3, "other", "tiny-qwen35")


def test_gemma_cpu_recipe():
    """The laptop recipe of the real pretrained base (issue 24): LoRA r16 all-linear, whole prompts of at
    most 1,536 tokens (longer ones dropped, not cut), the hand-labelled set, one CPU worker."""
    c = load_config(TrainConfig, CONFIGS / "gemma270m_lora_cpu.yaml")
    assert c.model.base == "gemma-3-270m" and c.model.dtype == "float32"  # bf16 is a slow fallback on AVX2 CPUs
    assert (c.lora.r, c.lora.target_modules) == (16, "all-linear")
    assert (c.data.max_seq_length, c.data.overlong) == (1536, "drop")
    assert c.data.train_path == "data/handlabel/train.parquet"
    assert not c.scaling.use_gpu and c.train.use_cpu and c.scaling.num_workers == 1
    # the one worker gets both cores (torch threads follow its CPUs) and every learning-curve point is kept
    assert c.scaling.cpus_per_worker == 2 and c.train.max_steps // c.train.save_steps <= c.run.keep_checkpoints


def test_init_adapter_must_be_a_lora_directory_of_the_configured_rank(tmp_path):
    from squeez_ray.train.run import check_inputs, init_adapter_problems

    with pytest.raises(ConfigError, match="random ones"):
        load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml", ["model.random_init=true", "model.architecture={model_type: qwen3}",
                                                             f"model.init_adapter={tmp_path}"])
    config = load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml", [f"model.init_adapter={tmp_path}"])
    assert "no adapter_config.json" in init_adapter_problems(config)[0]
    (tmp_path / "adapter_config.json").write_text("{not json")
    assert "not valid JSON" in init_adapter_problems(config)[0]
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 32}))
    problem, = init_adapter_problems(config)
    assert "r=8 alpha=32" in problem and f"r={config.lora.r}" in problem
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": config.lora.r, "lora_alpha": config.lora.alpha}))
    assert init_adapter_problems(config) == []
    bad = load_config(TrainConfig, CONFIGS / "tiny_cpu.yaml", [f"model.init_adapter={tmp_path / 'absent'}"])
    with pytest.raises(Exception, match="init_adapter"):  # every input problem at once, before Ray starts
        check_inputs(bad)


def test_the_shipped_adapter_is_what_its_recipe_trains():
    """adapters/gemma270m-squeez-lora (the quickstart's served model) names its base portably, was
    trained by gemma270m_lora_cpu.yaml on the current prompt layout, and can be trained on from
    (model.init_adapter) by that config; its model card is beside it and, where the adapter is a
    second stage trained on from another, gives both stages' commands."""
    from squeez_ray.prompt import PROMPT_FORMAT
    from squeez_ray.train.run import init_adapter_problems

    shipped = REPO / "adapters" / "gemma270m-squeez-lora"
    meta = json.loads((shipped / "squeez_train.json").read_text())
    assert meta["base_model"] == meta["base_model_path"] == "gemma-3-270m"
    assert meta["prompt_format"] == PROMPT_FORMAT and meta["model_family"] == "gemma"
    recipe = load_config(TrainConfig, CONFIGS / "gemma270m_lora_cpu.yaml")
    trained = meta["config"]
    assert trained["lora"] == {"r": recipe.lora.r, "alpha": recipe.lora.alpha, "dropout": recipe.lora.dropout,
                               "target_modules": recipe.lora.target_modules}
    assert (trained["train"]["max_steps"], trained["train"]["learning_rate"]) == (recipe.train.max_steps,
                                                                                 recipe.train.learning_rate)
    assert meta["global_step"] == recipe.train.max_steps
    assert init_adapter_problems(load_config(TrainConfig, CONFIGS / "gemma270m_lora_cpu.yaml",
                                             [f"model.init_adapter={shipped}"])) == []
    assert (shipped / "adapter_model.safetensors").stat().st_size < 10_000_000  # bf16: a few MB in git
    card = (shipped / "MODEL_CARD.md").read_text()
    assert "## Measured quality" in card
    if trained["model"].get("init_adapter"):
        assert "Stage 1" in card and "Stage 2" in card and "model.init_adapter=" in card
