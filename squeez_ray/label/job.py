"""The labelling job: raw observations (+ task texts) -> labelled examples, in resumable parts.

Output folder: ``labelled/part-NNNNN.parquet`` (the labelled-example schema, readable as one folder
by ``read_examples``), ``done/part-NNNNN.json`` (the (instance_id, command) keys each part settled,
and its drop counts) and ``manifest.json``. A rerun skips settled keys; rows lost to the endpoint
(budget spent, retries exhausted, HTTP errors) are not settled, so a rerun tries them again.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.label.pipeline import TeacherConfig, label_dataset
from squeez_ray.label.stages import to_example
from squeez_ray.ray_init import init_ray
from squeez_ray.errors import JobError

log = logging.getLogger(__name__)


class LabelJobError(JobError, RuntimeError):  # JobError: the job runner reports it as one line, exit 2
    pass


@dataclass
class LabelConfig:
    observations: str | None = None  # raw observations: a Parquet/JSONL file or a folder of Parquet parts
    instances: str | None = None  # SWE-bench-style instances whose problem_statement becomes the task text
    output_dir: str | None = None  # labelled/part-*.parquet and manifest.json go here
    source: str = "swe"  # the ``source`` of the labelled rows
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    chunk_size: int = 1000  # observations per output part (the unit of resume)
    limit: int | None = None  # label at most this many observations (trial runs)
    ray_address: str | None = None  # Ray cluster to join; None: RAY_ADDRESS, else a local Ray

    def validate(self) -> list[str]:
        problems = [f"{name}: required" for name in ("observations", "output_dir") if not getattr(self, name)]
        if self.chunk_size < 1:
            problems.append(f"chunk_size: must be >= 1, got {self.chunk_size}")
        if self.output_dir:
            from squeez_ray.config import output_dir_problem

            problems += [p for p in [output_dir_problem("output_dir", self.output_dir)] if p]
        return problems


def _settled(output_dir: Path) -> tuple[set[tuple[str, str]], int]:
    keys: set[tuple[str, str]] = set()
    parts = sorted((output_dir / "done").glob("part-*.json"))
    for part in parts:
        keys.update(tuple(k) for k in json.loads(part.read_text())["settled"])
    return keys, len(parts)


def _read_observations(path: str) -> list[dict[str, Any]]:
    """Raw observations, or a hand-labelling pool (``output_id``/``family`` rows) read as observations."""
    from squeez_ray.schema import read_observations

    if _is_pool(path):
        from squeez_ray.collect.pool import as_observation, read_pool

        return [as_observation(row) for row in read_pool(path).values()]
    return read_observations(path)


def _is_pool(path: str) -> bool:
    import pyarrow.parquet as pq

    p = Path(path)
    first = p if p.is_file() else next(iter(sorted([*p.glob("*.parquet"), *p.glob("*.jsonl")])), None)
    if first is None:
        return False
    if first.suffix == ".parquet":
        return "output_id" in pq.read_schema(first).names
    with first.open(encoding="utf-8") as handle:
        head = handle.readline()
    return '"output_id"' in head and '"family"' in head


def _tasks(instances: str | None) -> dict[str, str]:
    if not instances:
        return {}
    from squeez_ray.schema.instances import read_instances

    return {i["instance_id"]: i.get("problem_statement") or "" for i in read_instances(instances)}


def _engine(config: LabelConfig) -> tuple[Any, Any]:
    """The engine transform and (for HTTP) the shared request-budget actor."""
    teacher = config.teacher
    if teacher.engine == "http":
        from squeez_ray.label.engines import http_engine, make_budget_actor

        budget = make_budget_actor(teacher.http.request_budget)
        return http_engine(teacher.http, os.environ.get(teacher.http.api_key_env), budget), budget
    if teacher.engine == "vllm":
        from squeez_ray.label.vllm_teacher import VllmTeacher

        return VllmTeacher(teacher.vllm), None  # one engine for every chunk and round; closed at the end
    return None, None


def run_label(config: LabelConfig) -> dict[str, Any]:
    import ray

    from squeez_ray.config import to_dict
    from squeez_ray.io_utils import git_revision, write_json_atomic
    from squeez_ray.schema import write_examples

    started = time.time()
    output_dir = Path(config.output_dir)  # type: ignore[arg-type]
    observations = _read_observations(config.observations)  # type: ignore[arg-type]
    tasks = _tasks(config.instances)
    settled, next_part = _settled(output_dir)
    todo = [dict(o, background_task=tasks.get(o["instance_id"], "")) for o in observations
            if (o["instance_id"], o["command"]) not in settled]
    todo = todo[: config.limit] if config.limit is not None else todo
    log.info("%d observations, %d already settled, %d to label", len(observations), len(settled), len(todo))
    init_ray(config.ray_address)
    engine, budget = _engine(config)

    totals: Counter = Counter()
    dropped: Counter = Counter()
    drop_examples: dict[str, str] = {}
    from squeez_ray.progress import Progress

    progress = Progress("label", total=len(todo), unit="observations")
    try:  # the vLLM teacher's engine actor holds CPUs or GPUs: released even when a chunk raises
        for start in range(0, len(todo), config.chunk_size):
            chunk = todo[start:start + config.chunk_size]
            outcome = label_dataset(ray.data.from_items(chunk), config.teacher, engine)
            examples = [to_example(row, config.source) for row in outcome.dataset.iter_rows()]
            part = f"part-{next_part:05d}"
            write_examples(examples, output_dir / "labelled" / f"{part}.parquet")
            later = set(outcome.retry_later)
            chunk_keys = [(o["instance_id"], o["command"]) for o in chunk]
            write_json_atomic(output_dir / "done" / f"{part}.json", {
                "settled": [list(k) for k in chunk_keys if k not in later], "dropped": dict(outcome.dropped),
                "labelled": len(examples)})
            next_part += 1
            dropped += outcome.dropped
            drop_examples = {**outcome.drop_examples, **drop_examples}
            totals.update({"labelled": len(examples), "teacher_requests": outcome.teacher_requests,
                           "retried": outcome.retried, "recovered_by_retry": outcome.recovered_by_retry,
                           "left_for_rerun": len(later)})
            progress.update(len(chunk), labelled=totals["labelled"], dropped=sum(dropped.values()))
            if budget is not None and dropped.get("budget_exhausted"):
                log.warning("request budget spent: stopping; rerun with a new budget to label the rest")
                totals["not_started"] = len(todo) - start - len(chunk)
                break
    finally:
        progress.close()
        if hasattr(engine, "close"):
            engine.close()
    if budget is not None:
        totals["requests_charged_to_budget"] = ray.get(budget.spent.remote())
        ray.kill(budget)
    manifest = {
        "job": "label",
        "config": to_dict(config),
        "git_revision": git_revision(),
        "inputs": {"observations": str(config.observations), "instances": config.instances},
        "counts": {"observations": len(observations), "already_settled": len(settled), "to_label": len(todo),
                   **totals},
        "dropped": dict(dropped),
        "drop_examples": drop_examples,
        "seconds": round(time.time() - started, 2),
    }
    write_json_atomic(output_dir / "manifest.json", manifest)
    _check_teacher_answered(config, totals, dropped, drop_examples)
    return manifest


def _check_teacher_answered(config: LabelConfig, totals: Counter, dropped: Counter, examples: dict[str, str]) -> None:
    """A run whose every teacher request was lost to the transport (endpoint down, wrong URL) labelled
    nothing: say so and exit non-zero, rather than "done" with zero rows. Nothing was settled, so the
    rerun (once the endpoint is up) labels the same rows."""
    from squeez_ray.label import stages
    from squeez_ray.label.pipeline import TRANSPORT_REASONS

    before_teacher = {stages.OBSERVATION_ERROR, stages.EMPTY_OUTPUT, stages.OUTPUT_TOO_LONG}
    lost = {reason: n for reason, n in dropped.items() if reason in TRANSPORT_REASONS}
    answered = [r for r in dropped if r not in TRANSPORT_REASONS and r not in before_teacher]  # a reply was judged
    if totals["labelled"] or not lost or answered:
        return
    where = config.teacher.http.url if config.teacher.engine == "http" else f"the {config.teacher.engine} teacher"
    reason = max(lost, key=lost.__getitem__)
    detail = examples.get(reason, "").split(": ", 1)[-1][:200]
    raise LabelJobError(f"the teacher answered none of {sum(lost.values())} request(s) ({reason}: {detail}); "
                        f"is {where} up? Nothing was settled: rerun the same command once it answers")
