"""The training workflow's config: one dataclass per section, filled by ``squeez_ray.config.load_config``.

``validate`` methods return every problem at once (the loader collects them); checks that need the
filesystem or the cluster (input files exist, the base model is there) run at job start instead, so
the GPU configs validate on a laptop that holds neither the data nor the weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# Base-model names that build a tiny random-weight checkpoint on the fly (squeez_ray.train.tiny).
TINY_MODELS = ("tiny-qwen3", "tiny-qwen35")


@dataclass
class ModelSection:
    base: str = ""  # hub id ("Qwen/Qwen3.5-2B-Base"), a local checkpoint directory, or tiny-qwen3 / tiny-qwen35
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"  # weights as loaded for training
    attn_implementation: str | None = "sdpa"  # passed to from_pretrained; "flash_attention_2" where installed
    gradient_checkpointing: bool = False  # trades ~30% step time for activation memory at 20k tokens
    # Random weights of the base's architecture (benchmarks, no download): ``architecture`` holds the
    # config.json fields (model_type included); ``base`` is then only a label.
    random_init: bool = False
    architecture: dict[str, Any] = field(default_factory=dict)  # random_init only: config fields of the architecture (model_type first)
    # A LoRA adapter directory (a checkpoint of this recipe, e.g. the shipped adapters/gemma270m-squeez-lora)
    # to go on training instead of starting a fresh adapter; its rank and alpha must equal the lora section's.
    init_adapter: str | None = None

    def validate(self) -> list[str]:
        problems = []
        if not self.base:
            problems.append("base: required (a hub id, a checkpoint directory, or one of " + ", ".join(TINY_MODELS) + ")")
        if self.random_init and "model_type" not in self.architecture:
            problems.append("architecture: random_init needs the architecture's config fields, model_type included")
        if self.init_adapter and self.random_init:
            problems.append("init_adapter: an adapter trained on real weights means nothing on random ones")
        if self.architecture and not self.random_init:
            problems.append("architecture: only read when random_init is true; remove it or set random_init: true")
        return problems


@dataclass
class LoraSection:
    r: int = 16  # LoRA rank
    alpha: int = 32  # LoRA scaling (alpha / r multiplies the update)
    dropout: float = 0.05  # dropout on the LoRA input
    # "all-linear": every nn.Linear but the output head (attention, linear attention, MLP); or a list of names.
    target_modules: Any = "all-linear"

    def validate(self) -> list[str]:
        problems = []
        if self.r <= 0:
            problems.append(f"r: {self.r} must be > 0")
        if self.alpha <= 0:
            problems.append(f"alpha: {self.alpha} must be > 0")
        if not 0 <= self.dropout < 1:
            problems.append(f"dropout: {self.dropout} must be in [0, 1)")
        ok = isinstance(self.target_modules, str) or (
            isinstance(self.target_modules, list) and self.target_modules
            and all(isinstance(m, str) for m in self.target_modules))
        if not ok:
            problems.append(f"target_modules: {self.target_modules!r} must be 'all-linear' or a non-empty list of module names")
        return problems


@dataclass
class DataSection:
    train_path: str = ""  # Parquet / JSONL in the project format, or released Squeez prompt/response rows
    eval_path: str | None = None  # dev rows for in-training evaluation; None: the eval_split rows of train_path
    train_split: str | None = "train"  # keep rows whose split is this; None: every row
    eval_split: str | None = "dev"  # split used for eval loss and generation F1; None: none
    max_seq_length: int = 20000  # prompt + response tokens
    # Longer examples: "truncate" cuts tool-output lines outside the gold block (never the target);
    # "drop" skips them. Both are counted in the manifest.
    overlong: Literal["truncate", "drop"] = "truncate"
    system_prompt: str | None = None  # None: the prompt format's default (squeez_ray.prompt / prompt_ranges)
    # squeez-released-v2: the released verbatim contract (kept lines copied back); squeez-ranges-v1:
    # numbered lines in, line ranges out (squeez_ray.prompt_ranges). Checkpoints record which.
    prompt_format: str = "squeez-released-v2"
    shuffle_seed: int = 0  # seeds the shuffle of training examples
    repeat: int = 1  # repeat the training rows (smoke runs on a handful of rows)
    max_examples: int | None = None  # debug knob: first N rows after filtering
    tokenize_num_cpus: float = 0.5  # per Ray Data tokenizer actor; fractional so it fits beside the workers
    tokenize_batch_size: int = 32  # rows per Ray Data tokenize batch
    tokenize_actors: int = 1  # parallel tokenizer actors (raise on large sets / many CPUs)

    def validate(self) -> list[str]:
        problems = []
        if not self.train_path:
            problems.append("train_path: required")
        if self.max_seq_length < 64:
            problems.append(f"max_seq_length: {self.max_seq_length} is too small (need >= 64 tokens)")
        if self.repeat < 1:
            problems.append(f"repeat: {self.repeat} must be >= 1")
        if self.max_examples is not None and self.max_examples < 1:
            problems.append(f"max_examples: {self.max_examples} must be >= 1 or null")
        if self.tokenize_actors < 1:
            problems.append(f"tokenize_actors: {self.tokenize_actors} must be >= 1")
        from squeez_ray.prompt_ranges import FORMATS

        if self.prompt_format not in FORMATS:
            problems.append(f"prompt_format: {self.prompt_format!r} is not one of {', '.join(FORMATS)}")
        if self.tokenize_num_cpus <= 0:
            problems.append(f"tokenize_num_cpus: {self.tokenize_num_cpus} must be > 0")
        return problems


@dataclass
class OptimSection:
    epochs: float = 3.0  # passes over the training set (fractions allowed)
    max_steps: int = -1  # debug knob: > 0 overrides epochs (optimizer steps)
    per_device_batch_size: int = 8  # at most this many examples per batch (fewer when the token budget says so)
    # Padded tokens per device batch (examples x longest): examples are grouped by length under this
    # budget. None: per_device_batch_size x data.max_seq_length (the old worst case, less padding).
    max_tokens_per_batch: int | None = None
    gradient_accumulation_steps: int = 4  # steps accumulated per optimizer step
    learning_rate: float = 2e-4  # peak learning rate of the adapter
    lr_scheduler: str = "cosine"  # transformers scheduler name (cosine, linear, constant, ...)
    warmup_ratio: float = 0.05  # share of optimizer steps spent warming up
    weight_decay: float = 0.01  # AdamW weight decay
    max_grad_norm: float = 1.0  # gradient clipping norm
    bf16: bool = True  # mixed precision; false on CPU, where bf16 matmuls are slow
    logging_steps: int = 10  # optimizer steps between loss reports
    save_steps: int = 0  # 0: a checkpoint at the end of each epoch
    seed: int = 42  # seeds weights of the adapter and data order
    deepspeed: str | None = None  # DeepSpeed config JSON (ZeRO 2 / 3), relative to the working directory
    use_cpu: bool = False  # train on CPU even where CUDA exists (DeepSpeed on CPU needs it)
    # Debug knob: raise once at this optimizer step when the run has not resumed yet, to exercise Ray's
    # restart-from-checkpoint path; set it after the first checkpoint (0: off).
    debug_fail_at_step: int = 0

    def validate(self) -> list[str]:
        problems = []
        if self.epochs <= 0 and self.max_steps <= 0:
            problems.append("epochs / max_steps: set epochs > 0 or max_steps > 0")
        for name in ("per_device_batch_size", "gradient_accumulation_steps", "logging_steps"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: {getattr(self, name)} must be >= 1")
        if self.save_steps < 0:
            problems.append(f"save_steps: {self.save_steps} must be >= 0")
        if self.learning_rate <= 0:
            problems.append(f"learning_rate: {self.learning_rate} must be > 0")
        if not 0 <= self.warmup_ratio < 1:
            problems.append(f"warmup_ratio: {self.warmup_ratio} must be in [0, 1)")
        if self.weight_decay < 0:
            problems.append(f"weight_decay: {self.weight_decay} must be >= 0")
        if self.deepspeed is not None:
            problems.extend(_check_deepspeed_file(self.deepspeed))
        return problems


@dataclass
class ScalingSection:
    num_workers: int = 1  # Ray Train workers (one per GPU)
    use_gpu: bool = True  # one GPU per worker
    cpus_per_worker: float = 1.0  # CPUs reserved per worker
    resources_per_worker: dict[str, float] = field(default_factory=dict)  # extra (e.g. {"accelerator_type:A100": 0.01})
    placement_strategy: str = "PACK"  # Ray placement group strategy (PACK, SPREAD, STRICT_PACK)
    # Ray accelerator type the workers must run on (H100, A100, L40S, ...; ray.util.accelerators). Workers
    # land only on such nodes (the autoscaler starts one), and --plan checks the plan against that card
    # when this machine has none. None: any GPU; the fit is then checked on the card the workers get.
    accelerator_type: str | None = None

    def validate(self) -> list[str]:
        problems = []
        if self.num_workers < 1:
            problems.append(f"num_workers: {self.num_workers} must be >= 1")
        if self.cpus_per_worker <= 0:
            problems.append(f"cpus_per_worker: {self.cpus_per_worker} must be > 0")
        if self.placement_strategy not in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
            problems.append(f"placement_strategy: {self.placement_strategy!r} is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD")
        from squeez_ray.train.devices import ACCELERATOR_TYPES

        if self.accelerator_type is not None and self.accelerator_type not in ACCELERATOR_TYPES:
            problems.append(f"accelerator_type: {self.accelerator_type!r} is not one of {', '.join(ACCELERATOR_TYPES)}")
        if self.accelerator_type is not None and not self.use_gpu:
            problems.append("accelerator_type: set only with use_gpu: true")
        return problems


@dataclass
class RunSection:
    name: str = ""  # same storage_path + name = the same run: a resubmitted job resumes from its latest checkpoint
    storage_path: str = "runs"  # local directory or cloud URI (s3://, gs://); shared storage on multi-node clusters
    keep_checkpoints: int = 2  # checkpoints kept (by checkpoint_score, else the latest)
    checkpoint_score: str | None = None  # e.g. "eval_f1" to keep the best; None: keep the latest
    checkpoint_score_order: Literal["max", "min"] = "max"  # max or min of checkpoint_score is best
    max_failures: int = 2  # automatic restarts from the latest checkpoint after a worker failure

    def validate(self) -> list[str]:
        problems = []
        if not self.name or "/" in self.name:
            problems.append(f"name: {self.name!r} must be a non-empty name without '/'")
        if self.keep_checkpoints < 1:
            problems.append(f"keep_checkpoints: {self.keep_checkpoints} must be >= 1")
        if self.max_failures < -1:
            problems.append(f"max_failures: {self.max_failures} must be >= -1 (-1: retry forever)")
        return problems


@dataclass
class EvalSection:
    enabled: bool = False  # generate on a dev sample at each epoch end (each rank a shard); report F1, recall, compression
    num_examples: int = 32  # dev examples generated per evaluation
    max_new_tokens: int = 512  # generation budget per example
    batch_size: int = 4  # examples generated per batch
    fuzzy_threshold: float = 90.0  # rapidfuzz score for mapping generated lines back to source lines

    def validate(self) -> list[str]:
        problems = []
        if self.num_examples < 1:
            problems.append(f"num_examples: {self.num_examples} must be >= 1")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            problems.append("max_new_tokens / batch_size: must be >= 1")
        return problems


@dataclass
class TrainConfig:
    model: ModelSection = field(default_factory=ModelSection)
    lora: LoraSection = field(default_factory=LoraSection)
    data: DataSection = field(default_factory=DataSection)
    train: OptimSection = field(default_factory=OptimSection)
    scaling: ScalingSection = field(default_factory=ScalingSection)
    run: RunSection = field(default_factory=RunSection)
    eval: EvalSection = field(default_factory=EvalSection)

    def token_budget(self) -> int:
        """Padded tokens per device batch (train.max_tokens_per_batch, or batch size x max_seq_length)."""
        return self.train.max_tokens_per_batch or self.train.per_device_batch_size * self.data.max_seq_length

    def validate(self) -> list[str]:
        problems = []
        stage = deepspeed_stage(self.train.deepspeed)
        if self.eval.enabled and stage == 3:
            problems.append("eval.enabled: in-training generation runs each rank's model.generate on its own, which "
                            "ZeRO-3's sharded weights do not allow; use ZeRO-2 or evaluate the merged checkpoint afterwards")
        if self.train.deepspeed and not self.scaling.use_gpu and not self.train.use_cpu:
            problems.append("train.use_cpu: DeepSpeed without GPUs needs use_cpu: true")
        score = self.run.checkpoint_score
        if score and score.startswith("eval_") and not self.eval.enabled:
            problems.append(f"run.checkpoint_score: {score!r} needs eval.enabled: true")
        if score and score.startswith("eval_") and self.train.save_steps:
            problems.append(f"run.checkpoint_score: {score!r} is computed at epoch ends; set train.save_steps: 0")
        from squeez_ray.train.storage import relative_storage_problem

        spread = self.scaling.num_workers > 1 and self.scaling.placement_strategy in ("SPREAD", "STRICT_SPREAD")
        storage = relative_storage_problem(self.run.storage_path, spread_workers=spread)
        if storage:
            problems.append("run." + storage)
        if self.train.max_tokens_per_batch is not None and self.train.max_tokens_per_batch < self.data.max_seq_length:
            problems.append(f"train.max_tokens_per_batch: {self.train.max_tokens_per_batch} is below "
                            f"data.max_seq_length {self.data.max_seq_length}: the longest examples would fit no batch")
        if self.train.bf16 and self.model.dtype == "float16":
            problems.append("train.bf16 with model.dtype float16: pick one precision")
        return problems


def deepspeed_stage(path: str | None) -> int | None:
    """The ZeRO stage of a DeepSpeed config file, or None (no file / unreadable: reported by validate)."""
    if not path:
        return None
    try:
        return int(json.loads(Path(path).read_text()).get("zero_optimization", {}).get("stage", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _check_deepspeed_file(path: str) -> list[str]:
    file = Path(path)
    if not file.is_file():
        return [f"deepspeed: {path} does not exist (paths are relative to the working directory)"]
    try:
        data = json.loads(file.read_text())
    except ValueError as error:
        return [f"deepspeed: {path} is not valid JSON: {error}"]
    stage = data.get("zero_optimization", {}).get("stage") if isinstance(data, dict) else None
    if stage not in (0, 1, 2, 3):
        return [f"deepspeed: {path} has zero_optimization.stage {stage!r}; expected 0-3"]
    return []
