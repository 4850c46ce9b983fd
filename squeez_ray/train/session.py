"""Where the per-worker training loop gets its data, checkpoint and metrics sink: Ray Train, or in-process.

``train_loop_per_worker`` talks to a session instead of ``ray.train`` directly, so the same function
runs on a Ray Train worker (``RaySession``) and in-process on a machine without Ray (``LocalSession``:
one worker, batches from a list, metrics and checkpoints kept locally), e.g. the GPU check on an
air-gapped box that holds only torch, transformers, peft and accelerate.
"""

from __future__ import annotations

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


class _Rows:
    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)


class LocalSession:
    """One in-process worker: ``batch_rows`` are the planned batches; checkpoints are copied to ``run_dir``."""

    rank, world = 0, 1

    def __init__(self, batch_rows: list[dict[str, Any]], run_dir: str | Path):
        self.rows, self.run_dir = batch_rows, Path(run_dir)
        self.reports: list[dict[str, Any]] = []
        self.checkpoints: list[str] = []

    def dataset_shard(self) -> _Rows:
        return _Rows(self.rows)

    def checkpoint(self) -> None:
        return None

    def report(self, metrics: dict[str, Any], *, folder: str | None = None, name: str | None = None) -> None:
        self.reports.append(dict(metrics))
        if folder and name:
            target = self.run_dir / name
            shutil.copytree(folder, target, dirs_exist_ok=True)
            self.checkpoints.append(str(target))
