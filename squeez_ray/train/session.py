"""Where the per-worker training loop gets its data, checkpoint and metrics sink: Ray Train, or in-process.

``train_loop_per_worker`` talks to a session instead of ``ray.train`` directly, so the same function
runs on a Ray Train worker (``RaySession``) and in-process on a machine without Ray (``LocalSession``:
one worker, batches from a list, metrics and checkpoints kept locally), e.g. the GPU check on an
air-gapped box that holds only torch, transformers, peft and accelerate.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class RaySession:
    def __init__(self) -> None:
        import ray.train

        self._train = ray.train
        context = ray.train.get_context()
        self.rank, self.world = context.get_world_rank(), context.get_world_size()

    def dataset_shard(self) -> Any:
        return self._train.get_dataset_shard("train")

    def checkpoint(self) -> Any:
        return self._train.get_checkpoint()

    def report(self, metrics: dict[str, Any], *, folder: str | None = None, name: str | None = None) -> None:
        if folder is None and name is None:
            self._train.report(metrics)
            return
        checkpoint = self._train.Checkpoint.from_directory(folder) if folder else None
        self._train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=name,
                           delete_local_checkpoint_after_upload=True)

    def prepare_model(self, model: Any) -> Any:
        """Moved to this worker's device and wrapped for DDP when there are several workers."""
        import ray.train.torch

        return ray.train.torch.prepare_model(model)

    def device(self) -> Any:
        import ray.train.torch

        return ray.train.torch.get_device()


class _Rows:
    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def iter_batches(self, *, batch_size: int, batch_format: str = "numpy", local_shuffle_buffer_size: int | None = None,
                     local_shuffle_seed: int | None = None) -> Iterator[dict[str, list[Any]]]:
        """Ray Data's ``DataIterator.iter_batches`` for rows in memory: the whole list is shuffled (when a
        shuffle buffer is asked for), then cut into column batches of lists."""
        del batch_format  # columns come as lists, which every caller here treats like arrays
        rows = list(self.rows)
        if local_shuffle_buffer_size:
            random.Random(local_shuffle_seed).shuffle(rows)
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            yield {key: [row[key] for row in chunk] for key in chunk[0]}


class LocalSession:
    """One in-process worker: ``batch_rows`` are the planned batches (or rows to batch); checkpoints are
    copied to ``run_dir``; ``device`` is where ``prepare_model`` puts the model ("cpu", "cuda")."""

    rank, world = 0, 1

    def __init__(self, batch_rows: list[dict[str, Any]], run_dir: str | Path, device: str = "cpu"):
        self.rows, self.run_dir, self._device = batch_rows, Path(run_dir), device
        self.reports: list[dict[str, Any]] = []
        self.checkpoints: list[str] = []

    def dataset_shard(self) -> _Rows:
        return _Rows(self.rows)

    def checkpoint(self) -> None:
        return None

    def prepare_model(self, model: Any) -> Any:
        return model.to(self._device)

    def device(self) -> Any:
        import torch

        return torch.device(self._device)

    def report(self, metrics: dict[str, Any], *, folder: str | None = None, name: str | None = None) -> None:
        self.reports.append(dict(metrics))
        if folder and name:
            target = self.run_dir / name
            shutil.copytree(folder, target, dirs_exist_ok=True)
            self.checkpoints.append(str(target))
