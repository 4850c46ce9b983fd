"""Evaluation on one machine: examples + named pruners -> per-example rows -> summaries.

``score_row`` is pure (an example dict and a result, in; one flat row, out), so the Ray Data
evaluation can call it inside ``map_batches`` and get rows identical to the ones built here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from pathlib import Path
from typing import Any

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.metrics import score_example, summarize, summarize_by_tool
from squeez_ray.infer.base import PruneRequest, PruneResult, Pruner
from squeez_ray.io_utils import atomic_path, git_revision, write_json_atomic

log = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]

# Per-example row columns besides the metrics, in the order per_example.parquet shows them.
ID_COLUMNS = ("system", "example_index", "instance_id", "tool_type", "source")
ANSWER_COLUMNS = ("answers", "unparsed_answers", "answer_lines", "fuzzy_lines")  # generative backends only
COST_COLUMNS = ("pruned", "reason", "latency_ms", "input_tokens", "output_tokens", "unmatched_lines", *ANSWER_COLUMNS,
                "pred_spans")


def gold_pairs(example: Mapping[str, Any]) -> list[tuple[int, int]]:
    return [(int(s["start_line"]), int(s["end_line"])) for s in example["gold_spans"]]


def score_row(example: Mapping[str, Any], result: PruneResult | Mapping[str, Any], *, system: str,
              example_index: int, count_tokens: TokenCounter | None = None) -> dict[str, Any]:
    """One per-example row: ids, tool family, every metric, and the result's cost fields.

    ``result`` may be a PruneResult or its ``to_dict()`` (what crosses a Ray Data batch).
    """
    r = asdict(result) if is_dataclass(result) else dict(result)
    pred = [(int(s), int(e)) for s, e in r["spans"]]
    metrics = score_example(example["tool_output"], gold_pairs(example), pred, count_tokens)
    return {
        "system": system, "example_index": int(example_index), "instance_id": example["instance_id"],
        "tool_type": example.get("tool_type") or "unknown", "source": example.get("source"),
        **metrics,
        "pruned": bool(r.get("pruned", True)), "reason": r.get("reason"),
        "latency_ms": float(r.get("latency_ms") or 0.0), "input_tokens": int(r.get("input_tokens") or 0),
        "output_tokens": int(r.get("output_tokens") or 0), "unmatched_lines": int(r.get("unmatched_lines") or 0),
        **{key: int(r.get(key) or 0) for key in ANSWER_COLUMNS},
        "pred_spans": [[s, e] for s, e in pred],
    }


def prune_examples(pruner: Pruner, examples: Sequence[Mapping[str, Any]], *, batch_size: int = 16,
                   label: str = "evaluate") -> list[PruneResult]:
    """Results in example order. Fail-open stays on, as in production: a backend error becomes an
    unpruned row (``pruned=False``, counted as ``n_unpruned`` in every summary), never a crash."""
    from squeez_ray.progress import Progress

    results: list[PruneResult] = []
    with Progress(label, total=len(examples), unit="examples") as progress:
        for start in range(0, len(examples), max(1, batch_size)):
            batch = examples[start:start + batch_size]
            requests = [PruneRequest(e["query"], e["tool_output"], e.get("tool_type")) for e in batch]
            results.extend(pruner.prune_batch(requests))
            progress.update(len(batch), unpruned=sum(not r.pruned for r in results))
    return results


def run_evaluation(examples: Sequence[Mapping[str, Any]], systems: Mapping[str, Pruner], *, batch_size: int = 16,
                   count_tokens: TokenCounter | None = None,
                   on_system_done: Callable[[str, list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Score every system on every example; returns the per-example rows of all systems.

    ``on_system_done(label, rows)`` lets a caller persist each system's rows as soon as it finishes.
    """
    rows: list[dict[str, Any]] = []
    for label, pruner in systems.items():
        log.info("evaluating %s on %d examples", label, len(examples))
        results = prune_examples(pruner, examples, batch_size=batch_size, label=f"evaluate {label}")
        system_rows = [score_row(e, r, system=label, example_index=i, count_tokens=count_tokens)
                       for i, (e, r) in enumerate(zip(examples, results))]
        if on_system_done is not None:
            on_system_done(label, system_rows)
        rows.extend(system_rows)
    return rows


def summarize_systems(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{system: {"overall": ..., "by_tool": ...}}``: the ``systems`` object of metrics.json."""
    by_system: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_system.setdefault(row["system"], []).append(row)
    return {name: {"overall": summarize(group), "by_tool": summarize_by_tool(group)}
            for name, group in by_system.items()}


def examples_fingerprint(examples: Sequence[Mapping[str, Any]]) -> str:
    """A digest of what was evaluated, so a resumed run only reuses rows scored on the same data."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e["instance_id"], e["query"], e["tool_output"], e["gold_spans"]],
                                 ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


# ----- the evaluation job: data file + system names -> an output folder ------------------------------

TOKENS_FALLBACK = "characters / 4 (no tokenizer configured)"


@dataclass(frozen=True)
class SystemSpec:
    backend: str  # a name of infer/registry.BACKENDS
    label: str  # the name shown in tables and metrics.json
    model: str | None = None  # this system's checkpoint, over --model (two models of one backend in one run)

    @classmethod
    def parse(cls, text: str) -> "SystemSpec":
        """``bm25``, ``vllm=squeez-2b`` (backend name, then the label to show), or
        ``encoder=encoder-v2@runs/encoder/v2`` (then, after ``@``, the system's own checkpoint)."""
        backend, _, rest = text.partition("=")
        label, _, model = rest.partition("@")
        return cls(backend.strip(), (label or backend).strip(), model.strip() or None)

    def options(self, shared: BackendOptions) -> BackendOptions:
        return replace(shared, model=self.model) if self.model else shared


def token_counter(options: BackendOptions) -> tuple[TokenCounter | None, str]:
    """The served model's tokenizer when ``options.model`` names a checkpoint, else characters / 4."""
    if not options.model:
        return None, TOKENS_FALLBACK
    try:
        from transformers import AutoTokenizer

        from squeez_ray.hub import resolve_model

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(options.model, what="--model"))
    except Exception as error:  # noqa: BLE001 - a model dir without a loadable tokenizer: fall back, and say so
        log.warning("no tokenizer from %s (%s); counting tokens as characters / 4", options.model, error)
        return None, TOKENS_FALLBACK
    return (lambda text: len(tokenizer.encode(text, add_special_tokens=False))), f"tokenizer of {options.model}"


def evaluate_to_dir(data: str | Path, systems: Sequence[SystemSpec], out_dir: str | Path, *,
                    options: BackendOptions | None = None, limit: int | None = None, split: str | None = None,
                    resume: bool = True, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Evaluate ``systems`` on ``data`` and write metrics.json, per_example.parquet, report.md, the
    recall-vs-compression plot and manifest.json into ``out_dir``; returns the metrics.

    With ``resume``, a system whose rows were already scored on the same examples with the same
    backend options (``out_dir/systems/<label>.parquet``) is read back instead of run again.
    """
    from squeez_ray.infer.registry import BackendError, build_pruner
    from squeez_ray.schema import read_examples

    options = options or BackendOptions()
    labels = [s.label for s in systems]
    if len(set(labels)) != len(labels):
        raise BackendError(f"each system needs its own label, got {labels}; use NAME=LABEL to tell them apart")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise BackendError(f"--out {out_dir} is a file: give a folder (it is created if missing)")
    examples = read_examples(data, split=split, for_evaluation=True)
    if limit is not None:
        examples = examples[:limit]
    out = Path(out_dir)
    fingerprint = examples_fingerprint(examples)
    count_tokens, token_note = token_counter(options)
    rows: list[dict[str, Any]] = []
    resumed: list[str] = []
    for spec in systems:
        key = system_cache_key(fingerprint, spec, spec.options(options), token_note)
        cached = _read_cached(out / "systems" / f"{safe_label(spec.label)}.parquet", key) if resume else None
        if cached is not None:
            rows.extend(cached)
            resumed.append(spec.label)
            continue
        pruner = build_pruner(spec.backend, spec.options(options))
        try:
            system_rows = run_evaluation(examples, {spec.label: pruner}, batch_size=options.batch_size,
                                         count_tokens=count_tokens)
        finally:
            pruner.close()
        _write_rows(system_rows, out / "systems" / f"{safe_label(spec.label)}.parquet", {"squeez_cache_key": key})
        rows.extend(system_rows)
    config = {"data": str(data), "split": split, "limit": limit, "resume": resume,
              "systems": [asdict(s) for s in systems], "backend_options": public_options(options)}
    return write_evaluation(out, rows, examples, data=data, token_note=token_note, config=config,
                            argv=argv, extra_manifest={"resumed_systems": resumed})


def write_evaluation(out_dir: str | Path, rows: Sequence[Mapping[str, Any]], examples: Sequence[Mapping[str, Any]], *,
                     data: str | Path, token_note: str, config: Mapping[str, Any], argv: Sequence[str] | None = None,
                     extra_manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Summaries + every output file from per-example rows (also used by the Ray Data evaluation)."""
    from squeez_ray.evaluate.report import write_reports

    out = Path(out_dir)
    negatives = sum(1 for e in examples if not e["gold_spans"])
    systems_summary = summarize_systems(rows)
    first = next(iter(systems_summary.values()), {"overall": {}})["overall"]
    metrics = {"systems": systems_summary, "data": str(data), "n_examples": len(examples), "n_negatives": negatives,
               "gold_compression": first.get("gold_compression"), "token_counter": token_note}
    _write_rows(list(rows), out / "per_example.parquet")
    write_json_atomic(out / "metrics.json", metrics)
    write_reports(metrics, out)
    write_json_atomic(out / "manifest.json", {
        "job": "evaluate", "argv": list(argv) if argv is not None else None, "git_revision": git_revision(),
        "config": dict(config), "inputs": [str(data)], "examples_fingerprint": examples_fingerprint(examples),
        **(extra_manifest or {}),
        "counts": {"examples": len(examples), "negatives": negatives, "systems": len(systems_summary),
                   "rows": len(rows)},
        "outputs": ["metrics.json", "per_example.parquet", "report.md", "recall_vs_compression.png"],
    })
    return metrics


def public_options(options: BackendOptions) -> dict[str, Any]:
    """Backend options as recorded in manifests and cache keys: JSON values, the API key masked."""
    values = json.loads(json.dumps(asdict(options), default=str))
    if values.get("api_key"):
        values["api_key"] = "***"  # manifests are shared; secrets are not
    return values


def system_cache_key(fingerprint: str, spec: SystemSpec, options: BackendOptions, token_note: str) -> str:
    """Identity of one system's scored rows: same examples, backend, options and token counter ->
    same key, so a rerun (in-process or the Ray Data bulk form) reuses them."""
    payload = json.dumps([fingerprint, spec.backend, public_options(options), token_note], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def safe_label(label: str) -> str:
    """A system label as a file name."""
    return re.sub(r"[^\w.-]+", "_", label) or "system"


def _write_rows(rows: list[dict[str, Any]], path: Path, metadata: dict[str, str] | None = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _read_cached(path: Path, key: str) -> list[dict[str, Any]] | None:
    import pyarrow.parquet as pq

    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
    except Exception as error:  # noqa: BLE001 - a damaged cache is recomputed, never trusted
        log.warning("ignoring unreadable cached rows %s: %s", path, error)
        return None
    if (table.schema.metadata or {}).get(b"squeez_cache_key", b"").decode() != key:
        return None
    log.info("resuming: reusing %d scored rows from %s", table.num_rows, path)
    return table.to_pylist()
