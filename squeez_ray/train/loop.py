"""The per-worker training loop: Hugging Face Trainer + PEFT, fed by a Ray Data shard, reporting to Ray.

Contract with Ray Train (as in the Anyscale fine-tuning templates): resume from
``ray.train.get_checkpoint()`` when there is one; report metrics at every logging step and each
checkpoint with ``ray.train.report(metrics, checkpoint=...)`` from every rank (the call is a barrier).
Each rank trains in its own local output folder, so ranks never race on files; Ray merges the ranks'
checkpoint folders (rank 0's adapter + optimiser, every rank's RNG state / ZeRO shards) into one.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from squeez_ray.train.data import collate

log = logging.getLogger(__name__)

NON_FINITE = "training diverged"  # the start of NonFiniteTraining's message; run.py looks for it


class NonFiniteTraining(RuntimeError):
    """The loss or gradient norm became NaN / inf: every later step and checkpoint would be garbage."""


METADATA_FILE = "squeez_train.json"  # written into every checkpoint: what merge / serve / eval read


def _shard_dataset_class():
    from torch.utils.data import IterableDataset

    class ShardBatches(IterableDataset):
        """One epoch of a worker's Ray Data shard, whose rows are whole token-budget batches, with a known length.

        The length lets the HF Trainer count epochs (and fire epoch-end evaluation and saves) as it
        does for a map-style dataset; extra rows are consumed but not yielded, so every worker
        drains its split and the streaming split stays in step.
        """

        def __init__(self, shard: Any, n_batches: int, pad_id: int):
            self.shard, self.n_batches, self.pad_id = shard, n_batches, pad_id

        def __len__(self) -> int:
            return self.n_batches

        def __iter__(self):
            for i, row in enumerate(self.shard.iter_rows()):
                if i < self.n_batches:
                    yield collate({"input_ids": list(row["input_ids"]), "prompt_len": list(row["prompt_len"])},
                                  pad_id=self.pad_id)

    return ShardBatches


def _trainer_class():
    from torch.utils.data import DataLoader
    from transformers import Trainer

    from squeez_ray.train.loss import response_only_forward

    class ShardTrainer(Trainer):
        # The loss below is normalised over the whole accumulated batch (num_items_in_batch).
        loss_is_scaled_for_ga = True

        # Ray already shards and batches the data: no sampler, no accelerate re-sharding.
        def get_train_dataloader(self) -> DataLoader:
            return DataLoader(self.train_dataset, batch_size=None)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            """Response-only loss (squeez_ray.train.loss): the head runs on response positions only.

            Normalised as the stock causal-LM loss is: summed token losses over the label tokens of
            the whole accumulated batch on every device (DDP averages gradients, hence x processes).
            """
            total, count = response_only_forward(model, inputs)
            if num_items_in_batch is None:
                loss = total / max(count, 1) / self.current_gradient_accumulation_steps
            else:
                loss = total / num_items_in_batch
                if self.args.average_tokens_across_devices:
                    loss = loss * self.accelerator.num_processes
            return (loss, None) if return_outputs else loss

    return ShardTrainer


def _callbacks(session: Any, metadata: dict[str, Any], eval_rows: list[dict[str, Any]] | None, cfg: Any,
               tokenizer: Any, fail_at_step: int, steps_per_epoch: int, resumed: bool, progress: bool = False):
    from transformers import TrainerCallback

    shared: dict[str, Any] = {"eval": {}, "latest": {}}

    class ReportToRay(TrainerCallback):
        """Every logging step: loss, learning rate, tokens/s to Ray; every save: the checkpoint too."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.mark = (time.perf_counter(), state.num_input_tokens_seen)
            # After a resume the Trainer has restored the step: report where this attempt started.
            shared["latest"]["start_step"] = state.global_step

        def on_log(self, args, state, control, logs=None, **kwargs):
            now, tokens = time.perf_counter(), state.num_input_tokens_seen
            metrics = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            metrics.update(step=state.global_step, epoch=state.epoch or 0.0, num_input_tokens_seen=tokens)
            from squeez_ray.train.peak import process_peak_bytes

            metrics["peak_memory_bytes"] = process_peak_bytes()  # compared with jobs/train.py --plan
            if "loss" in metrics:  # a training-step log (not the end-of-run summary): throughput since the last one
                elapsed = now - self.mark[0]
                metrics["tokens_per_s"] = (tokens - self.mark[1]) / elapsed if elapsed > 0 else 0.0
                self.mark = (now, tokens)
                if progress and session.rank == 0:  # the driver is a terminal: a line a person can watch
                    print(f"train: step {state.global_step}/{state.max_steps}, loss {metrics['loss']:.4f}, "
                          f"{metrics['tokens_per_s']:.0f} tokens/s, epoch {metrics['epoch']:.2f}", flush=True)
            bad = {k: metrics[k] for k in ("loss", "grad_norm") if k in metrics and not math.isfinite(metrics[k])}
            if bad:  # before this step's save (the Trainer logs, then saves): no checkpoint of broken weights
                raise NonFiniteTraining(f"{NON_FINITE}: step {state.global_step}: "
                                        f"{', '.join(f'{k} {v}' for k, v in bad.items())}; lower train.learning_rate "
                                        f"(now {cfg.train.learning_rate:g}) or check the data")
            shared["latest"] = {**shared["latest"], **metrics}
            session.report({**shared["latest"], **shared["eval"]})

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if session.rank == 0:
                # The eval scores ride along, so jobs/merge.py can pick the best checkpoint from the files alone.
                (folder / METADATA_FILE).write_text(json.dumps({**metadata, "global_step": state.global_step,
                                                                "metrics": dict(shared["eval"])}, indent=2))
            metrics = {**shared["latest"], **shared["eval"], "step": state.global_step}
            # Unique per step, so a resumed run never overwrites an earlier checkpoint.
            session.report(metrics, folder=str(folder) if folder.is_dir() else None,
                           name=f"checkpoint_{state.global_step:06d}")
            self.mark = (time.perf_counter(), state.num_input_tokens_seen)  # saving is not training time

    class EpochEval(TrainerCallback):
        """Every rank: generate on its shard of the dev sample when a step completes an epoch or the run.

        All ranks evaluate (and gather the scores), so none waits in the next step's all-reduce for
        rank 0 to finish a long evaluation (NCCL's default timeout is 30 minutes).

        Runs in on_step_end, before the Trainer's save of that step, so the scores ride on the
        checkpoint's report (and ``run.checkpoint_score: eval_f1`` can rank checkpoints).
        """

        def on_step_end(self, args, state, control, model=None, **kwargs):
            from squeez_ray.train.evaluate import evaluate_generation

            if state.global_step % steps_per_epoch and state.global_step < state.max_steps:
                return
            started = time.perf_counter()
            scores = evaluate_generation(model, tokenizer, eval_rows, system_prompt=metadata["system_prompt"],
                                         max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size,
                                         fuzzy_threshold=cfg.eval.fuzzy_threshold, rank=session.rank,
                                         world=session.world,
                                         prompt_format=metadata.get("prompt_format") or "squeez-released-v2")
            shared["eval"] = {f"eval_{k}": v for k, v in scores.items()}
            log.info("step %d eval (%d examples over %d ranks, %.1fs): %s", state.global_step, len(eval_rows), session.world,
                     time.perf_counter() - started, shared["eval"])

    class FailOnce(TrainerCallback):
        """Debug knob (train.debug_fail_at_step): crash once, to exercise Ray's restart-and-resume path.

        Only an attempt that started without a checkpoint fails (get_checkpoint() is read before
        training: during a run it returns the checkpoints this attempt reported itself).
        """

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == fail_at_step and not resumed:
                raise RuntimeError(f"debug_fail_at_step={fail_at_step}: injected failure")

    callbacks = [ReportToRay()]
    if eval_rows:  # on every rank: see EpochEval
        callbacks.insert(0, EpochEval())
    if fail_at_step > 0:
        callbacks.append(FailOnce())
    return callbacks


def training_arguments(cfg: Any, output_dir: str, *, world_size: int, deepspeed: dict[str, Any] | None = None) -> Any:
    """``deepspeed`` is the config's content, read on the driver: workers run in their own folders
    (and on other nodes), where the relative path in the YAML means nothing."""
    from transformers import TrainingArguments

    t = cfg.train
    return TrainingArguments(
        output_dir=output_dir, per_device_train_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, num_train_epochs=t.epochs,
        max_steps=t.max_steps, learning_rate=t.learning_rate, lr_scheduler_type=t.lr_scheduler,
        warmup_steps=t.warmup_ratio, weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
        bf16=t.bf16, use_cpu=t.use_cpu or not cfg.scaling.use_gpu, seed=t.seed, deepspeed=deepspeed,
        logging_strategy="steps", logging_steps=t.logging_steps,
        save_strategy="steps" if t.save_steps else "epoch", save_steps=t.save_steps or 500, save_total_limit=1,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if cfg.model.gradient_checkpointing else None,
        include_num_input_tokens_seen="non_padding", report_to="none", disable_tqdm=True,
        remove_unused_columns=False, dataloader_pin_memory=False,
        ddp_find_unused_parameters=False if world_size > 1 else None)


def train_loop_per_worker(loop_config: dict[str, Any]) -> None:
    """Runs on every Ray Train worker, or in-process with ``loop_config["session"]`` (a LocalSession).

    ``loop_config``: config, base, n_batches, metadata, eval_rows, deepspeed, session. Returns nothing:
    Ray Train serialises a worker's return value, and results go through the session's reports.
    """
    from squeez_ray.train.kernels import warn_if_slow_kernels
    from squeez_ray.train.model import apply_lora, continue_lora, load_base_model, load_tokenizer

    cfg = loop_config["config"]
    session = loop_config.get("session")
    if session is None:
        from squeez_ray.train.session import RaySession

        session = RaySession()
    if loop_config.get("plan_total_bytes"):  # mixed clusters: this worker's card, before any weight is loaded
        from squeez_ray.train.fit_check import check_this_device

        check_this_device(loop_config["plan_total_bytes"])
    tokenizer = load_tokenizer(loop_config["base"])
    from transformers import set_seed

    set_seed(cfg.train.seed)  # the adapter's initial weights too (the Trainer seeds only after they exist)
    base_model = load_base_model(loop_config["base"], cfg.model)
    if cfg.model.init_adapter:
        model = continue_lora(base_model, cfg.model.init_adapter, gradient_checkpointing=cfg.model.gradient_checkpointing)
    else:
        model = apply_lora(base_model, cfg.lora, gradient_checkpointing=cfg.model.gradient_checkpointing)
    warn_if_slow_kernels(model, use_gpu=cfg.scaling.use_gpu and not cfg.train.use_cpu)
    dataset = _shard_dataset_class()(session.dataset_shard(), loop_config["n_batches"], tokenizer.pad_token_id)
    # The Trainer's own folder: every save is handed to the session (Ray uploads it to storage and deletes
    # it; a LocalSession copies it), so nothing here outlives the run. It used to stay in /tmp: one folder
    # per worker per run, holding the last checkpoint when a run failed or trained in-process.
    output_dir = tempfile.mkdtemp(prefix=f"squeez-train-rank{session.rank}-")
    try:
        checkpoint = session.checkpoint()
        trainer = _trainer_class()(
            model=model, args=training_arguments(cfg, output_dir, world_size=session.world,
                                                 deepspeed=loop_config.get("deepspeed")),
            train_dataset=dataset,
            callbacks=_callbacks(session, loop_config["metadata"], loop_config.get("eval_rows"), cfg, tokenizer,
                                 cfg.train.debug_fail_at_step,
                                 steps_per_epoch=math.ceil(loop_config["n_batches"] / cfg.train.gradient_accumulation_steps),
                                 resumed=checkpoint is not None, progress=bool(loop_config.get("progress"))))
        if checkpoint is None:
            trainer.train()
            return
        # Keep the folder open for the whole run: for cloud storage it is a temporary download.
        with checkpoint.as_directory() as folder:
            log.info("rank %d resuming from %s", session.rank, folder)
            trainer.train(resume_from_checkpoint=folder)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
