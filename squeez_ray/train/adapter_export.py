"""A training checkpoint's LoRA adapter as a small folder to ship (the quickstart's served model).

A Ray Train checkpoint holds the adapter beside the optimizer, scheduler and RNG state (three times
its size) and records the base as a path on the machine that trained it. The exported folder keeps
only what merging and further training read: ``adapter_model.safetensors`` (cast to ``dtype``:
bfloat16 halves it, at the cost of rounding the float32 weights), ``adapter_config.json`` and
``squeez_train.json`` with the base named portably (``base_name``, e.g. the packaged
``gemma-3-270m``, which ``squeez_ray.hub.resolve_model`` turns into a local directory anywhere). It
is a training checkpoint to ``jobs/merge.py`` and a ``model.init_adapter`` to ``jobs/train.py``.
The folder appears whole or not at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from squeez_ray.io_utils import atomic_dir
from squeez_ray.train.loop import METADATA_FILE
from squeez_ray.train.merge import MergeError, find_checkpoint

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def export_adapter(checkpoint: str | Path, out_dir: str | Path, *, base_name: str | None = None,
                   dtype: str = "bfloat16", overwrite: bool = False) -> dict[str, Any]:
    """Write the adapter of ``checkpoint`` (a checkpoint or a run folder: its latest) to ``out_dir``;
    returns the exported ``squeez_train.json``."""
    import torch
    from safetensors.torch import load_file, save_file

    source = find_checkpoint(checkpoint, "latest")
    for name in (ADAPTER_WEIGHTS, ADAPTER_CONFIG):
        if not (source / name).is_file():
            raise MergeError(f"{source} has no {name}: not a LoRA checkpoint of this recipe")
    if not hasattr(torch, dtype) or not getattr(torch, dtype).is_floating_point:
        raise MergeError(f"--dtype {dtype!r}: use bfloat16, float16 or float32")
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise MergeError(f"{out} exists; pass --overwrite to replace it")
    meta = json.loads((source / METADATA_FILE).read_text())
    adapter_config = json.loads((source / ADAPTER_CONFIG).read_text())
    base = base_name or meta.get("base_model")
    if not base:
        raise MergeError(f"{source / METADATA_FILE} names no base model; pass --base-name")
    meta.update(base_model=base, base_model_path=base, exported_from=str(source), adapter_dtype=dtype)
    adapter_config["base_model_name_or_path"] = base
    weights = {k: v.to(getattr(torch, dtype)).contiguous() for k, v in load_file(source / ADAPTER_WEIGHTS).items()}

    with atomic_dir(out) as staging:
        save_file(weights, staging / ADAPTER_WEIGHTS, metadata={"format": "pt"})
        (staging / ADAPTER_CONFIG).write_text(json.dumps(adapter_config, indent=2) + "\n")
        (staging / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        for keep in out.glob("*.md") if out.is_dir() else ():  # a model card written beside it stays
            shutil.copy2(keep, staging / keep.name)
    return meta
