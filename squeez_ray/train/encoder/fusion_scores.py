"""The encoder's per-line scores over a labelled split, computed once and cached for fusion training.

Fitting the fusion combiner (``encoder_fusion_fit``) tries many feature sets and thresholds; all of them
start from the same encoder scores, which take minutes per thousand examples on a laptop CPU. So they are
computed once, in chunks that are each written atomically (a killed run resumes with the rows it lacks), and
read back as ``{instance_id: scores}``. The cache lives under ``runs/`` (git-ignored).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from squeez_ray.infer.encoder.model import ENCODER_CONFIG
from squeez_ray.infer.encoder.onnx_runtime import TOKENIZER_FILE
from squeez_ray.io_utils import atomic_path

CHUNK = 25  # examples per cache file: a killed run loses at most this many examples' work
META_FILE = "cache.json"  # which model's scores the directory holds


def chunk_path(cache_dir: Path, index: int) -> Path:
    return cache_dir / f"scores-{index:05d}.npz"


def claim_for_model(cache_dir: str | Path, model_id: str) -> None:
    """A cache directory holds one model's scores: the first use records ``model_id`` (a hash of the
    model's files); a later use with another model is refused instead of fitting on its stale scores."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    meta = cache_dir / META_FILE
    if meta.is_file():
        recorded = json.loads(meta.read_text()).get("model_id")
        if recorded != model_id:
            raise ValueError(f"{cache_dir} holds scores of another model ({recorded}, not {model_id}): "
                             "use another --cache")
        return
    with atomic_path(meta) as tmp:
        Path(tmp).write_text(json.dumps({"model_id": model_id}) + "\n")


# What in squeez_encoder.json decides the encoder's scores; thresholds, dev curves and the default
# recall target do not (recalibrating a model must not orphan the scores already cached for it).
SCORING_SETTINGS = ("window", "special_ids")


def model_id(model_dir: str | Path) -> str:
    """sha256 over what decides the model's encoder scores: its ONNX graphs, its tokenizer, and the
    windowing fields of its settings (``SCORING_SETTINGS``)."""
    digest = hashlib.sha256()
    for path in sorted(Path(model_dir).iterdir()):
        if not path.is_file():
            continue
        if path.suffix == ".onnx" or path.name == TOKENIZER_FILE:
            digest.update(path.name.encode())
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        elif path.name == ENCODER_CONFIG:
            settings = json.loads(path.read_text())
            digest.update(json.dumps({k: settings.get(k) for k in SCORING_SETTINGS}, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def score_to_cache(score: Callable[[Sequence[tuple[str, str]]], list[np.ndarray]],
                   rows: Sequence[tuple[str, str, str]], cache_dir: str | Path, *, chunk: int = CHUNK,
                   on_chunk: Callable[[int, int], None] | None = None) -> int:
    """Score the ``rows`` ((instance_id, query, tool_output)) not yet in ``cache_dir`` into new chunks after
    the ones there; returns how many chunks were scored now. What is cached is decided by instance id, not
    by chunk position: a rerun over another selection of rows (a new --max-train-lines) scores exactly the
    rows it lacks. One cache directory holds one model's scores (``claim_for_model``)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached = cached_ids(cache_dir)
    todo = [row for row in rows if str(row[0]) not in cached]
    taken = [int(p.stem.split("-")[1]) for p in cache_dir.glob("scores-*.npz")]
    first = max(taken) + 1 if taken else 0
    done = 0
    for offset, start in enumerate(range(0, len(todo), chunk)):
        part = todo[start:start + chunk]
        scores = score([(query, output) for _, query, output in part])
        with atomic_path(chunk_path(cache_dir, first + offset)) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, ids=np.array([i for i, _, _ in part]),
                     **{f"s{k}": s.astype(np.float32) for k, s in enumerate(scores)})
        done += 1
        if on_chunk:
            on_chunk(first + offset, start + len(part))
    return done


def cached_ids(cache_dir: str | Path) -> set[str]:
    ids: set[str] = set()
    for path in Path(cache_dir).glob("scores-*.npz"):
        with np.load(path) as data:
            ids.update(str(i) for i in data["ids"])
    return ids


def read_cache(cache_dirs: Iterable[str | Path]) -> dict[str, np.ndarray]:
    """Every cached example's scores, ``{instance_id: per-line keep-probabilities}``."""
    out: dict[str, np.ndarray] = {}
    for cache_dir in cache_dirs:
        for path in sorted(Path(cache_dir).glob("scores-*.npz")):
            with np.load(path) as data:
                for k, instance_id in enumerate(data["ids"]):
                    out[str(instance_id)] = data[f"s{k}"]
    return out
