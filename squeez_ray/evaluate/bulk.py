"""``squeez eval`` on a Ray cluster: the same systems, metrics and reports, with each system's
pruner held by a Ray Data actor pool (an in-cluster vLLM engine per actor, a transformers model
per actor, or HTTP clients of a Serve / OpenAI-compatible endpoint whose in-flight requests are
bounded by ``--workers`` x ``max_concurrency``).

Scoring and reports are the single-machine code (``local.score_row``, ``local.write_evaluation``),
so the numbers are identical by construction. Each actor writes the rows of every batch it scores
as one part file at once, so a killed run restarts where it stopped: examples already scored for a
system (same examples, backend and options) are skipped.

Examples are read on the driver by ``schema.read_examples`` (every supported format, one
implementation) and shipped to the actors as JSON strings, which keeps nested fields such as
``gold_spans`` exact through Arrow.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from squeez_ray.evaluate.local import (
    SystemSpec,
    examples_fingerprint,
    public_options,
    safe_label,
    score_row,
    system_cache_key,
    token_counter,
    write_evaluation,
)
from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.registry import MODEL_BACKENDS, BackendOptions, build_pruner
from squeez_ray.io_utils import write_text_atomic
from squeez_ray.ray_init import init_ray

log = logging.getLogger(__name__)
PARTS_DIR = "bulk_parts"  # <out>/bulk_parts/<label>/<cache key>/part-*.jsonl


@dataclass
class BulkSettings:
    workers: int = 1  # actors per system
    batch_size: int = 16  # examples per actor call (one part file each)
    cpus_per_worker: float = 0.5
    gpus_per_worker: float = 0.0  # for model backends; 1 for a vLLM engine on a GPU node


class SystemWorker:
    """A Ray Data actor: one pruner for one system; scores a batch and saves its rows before returning."""

    def __init__(self, spec: SystemSpec, options: BackendOptions, parts_dir: str):
        self.spec, self.parts_dir = spec, Path(parts_dir)
        self.pruner = build_pruner(spec.backend, spec.options(options))
        self.count_tokens, _ = token_counter(options)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        examples = [json.loads(text) for text in batch["example"]]
        indices = [int(i) for i in batch["example_index"]]
        # Fail-open as in the single-machine runner: a backend error is an unpruned row, counted.
        results = self.pruner.prune_batch([PruneRequest(e["query"], e["tool_output"], e.get("tool_type"))
                                           for e in examples])
        rows = [score_row(e, r, system=self.spec.label, example_index=i, count_tokens=self.count_tokens)
                for e, r, i in zip(examples, results, indices)]
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        # Named after the batch's examples: a batch Ray runs again (its actor died with its node after
        # saving) rewrites its own part instead of storing the rows a second time.
        digest = hashlib.sha1(",".join(map(str, sorted(indices))).encode()).hexdigest()[:12]
        write_text_atomic(self.parts_dir / f"part-{min(indices):08d}-{digest}.jsonl", lines)
        return {"example_index": indices}


def read_parts(parts_dir: Path) -> dict[int, dict[str, Any]]:
    """Rows already scored in ``parts_dir``, by example index (a part is complete or absent)."""
    rows: dict[int, dict[str, Any]] = {}
    for part in sorted(parts_dir.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[int(row["example_index"])] = row
    return rows


def evaluate_bulk(data: str | Path, systems: Sequence[SystemSpec], out_dir: str | Path, *,
                  options: BackendOptions | None = None, bulk: BulkSettings | None = None, limit: int | None = None,
                  split: str | None = None, resume: bool = True, argv: Sequence[str] | None = None,
                  echo: bool = True) -> dict[str, Any]:
    """Evaluate ``systems`` on ``data`` with Ray Data; writes what ``evaluate_to_dir`` writes."""
    import ray

    from squeez_ray.infer.registry import BackendError
    from squeez_ray.schema import read_examples

    options, bulk = options or BackendOptions(), bulk or BulkSettings()
    labels = [s.label for s in systems]
    if len(set(labels)) != len(labels):
        raise BackendError(f"each system needs its own label, got {labels}; use NAME=LABEL to tell them apart")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise BackendError(f"--out {out_dir} is a file: give a folder (it is created if missing)")
    examples = read_examples(data, split=split, for_evaluation=True)[:limit]
    out = Path(out_dir)
    fingerprint = examples_fingerprint(examples)
    _, token_note = token_counter(options)
    if not ray.is_initialized():
        init_ray()
    rows: list[dict[str, Any]] = []
    costs: dict[str, dict[str, Any]] = {}
    for spec in systems:
        key = system_cache_key(fingerprint, spec, spec.options(options), token_note)
        parts_dir = out / PARTS_DIR / safe_label(spec.label) / key[:16]
        done = read_parts(parts_dir) if resume else {}
        if not resume:
            for stale in parts_dir.glob("part-*.jsonl"):
                stale.unlink()
        todo = [i for i in range(len(examples)) if i not in done]
        started = time.perf_counter()
        if todo:
            _run_system(spec, options, bulk, parts_dir, examples, todo)
        seconds = time.perf_counter() - started
        system_rows = read_parts(parts_dir)
        missing = [i for i in range(len(examples)) if i not in system_rows]
        if missing:
            raise RuntimeError(f"system {spec.label}: {len(missing)} example(s) have no scored row after the run")
        rows.extend(system_rows[i] for i in range(len(examples)))
        costs[spec.label] = {"examples_scored_this_run": len(todo), "examples_resumed": len(examples) - len(todo),
                             "wall_seconds": round(seconds, 3),
                             "wall_ms_per_example": round(1000 * seconds / len(todo), 3) if todo else None}
        if echo:
            print(f"{spec.label}: scored {len(todo)} example(s), {len(examples) - len(todo)} resumed, "
                  f"{seconds:.1f} s", flush=True)
    config = {"data": str(data), "split": split, "limit": limit, "resume": resume, "mode": "ray",
              "systems": [asdict(s) for s in systems], "backend_options": public_options(options),
              "bulk": asdict(bulk)}
    return write_evaluation(out, rows, examples, data=data, token_note=token_note, config=config, argv=argv,
                            extra_manifest={"cost_per_system": costs})


def _run_system(spec: SystemSpec, options: BackendOptions, bulk: BulkSettings, parts_dir: Path,
                examples: Sequence[Mapping[str, Any]], todo: list[int]) -> None:
    import ray

    items = [{"example_index": i, "example": json.dumps(examples[i], ensure_ascii=False)} for i in todo]
    blocks = max(1, min(len(items), -(-len(items) // bulk.batch_size)))
    dataset = ray.data.from_items(items, override_num_blocks=blocks)
    gpus = bulk.gpus_per_worker if spec.backend in MODEL_BACKENDS else 0  # a model's workers get the GPUs
    dataset = dataset.map_batches(SystemWorker, fn_constructor_kwargs={"spec": spec, "options": options,
                                                                       "parts_dir": str(parts_dir)},
                                  batch_size=bulk.batch_size, compute=ray.data.ActorPoolStrategy(size=bulk.workers),
                                  num_cpus=bulk.cpus_per_worker, num_gpus=gpus or None)
    from squeez_ray.progress import Progress

    with Progress(f"evaluate {spec.label}", total=len(items), unit="examples") as progress:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            progress.update(batch.num_rows)
