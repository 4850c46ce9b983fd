"""The encoder's per-line scores over a labelled split, computed once and cached for fusion training.

Fitting the fusion combiner (``encoder_fusion_fit``) tries many feature sets and thresholds; all of them
start from the same encoder scores, which take minutes per thousand examples on a laptop CPU. So they are
computed once, in chunks that are each written atomically (a killed run resumes with the rows it lacks), and
read back as ``{instance_id: scores}``. The cache lives under ``runs/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from squeez_ray.io_utils import atomic_path

CHUNK = 25  # examples per cache file: a killed run loses at most this many examples' work


def chunk_path(cache_dir: Path, index: int) -> Path:
    return cache_dir / f"scores-{index:05d}.npz"


def score_to_cache(score: Callable[[Sequence[tuple[str, str]]], list[np.ndarray]],
                   rows: Sequence[tuple[str, str, str]], cache_dir: str | Path, *, chunk: int = CHUNK,
                   on_chunk: Callable[[int, int], None] | None = None) -> int:
    """Score the ``rows`` ((instance_id, query, tool_output)) not yet in ``cache_dir`` into new chunks after
    the ones there; returns how many chunks were scored now. What is cached is decided by instance id, not
    by chunk position: a rerun over another selection of rows (a new --max-train-lines) scores exactly the
    rows it lacks. One cache directory holds one model's scores."""
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
