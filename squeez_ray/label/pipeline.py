"""The labelling pipeline on Ray Data: observations -> (query, spans) labels, drops counted by reason.

Each teacher round is one pass of an engine over the rows still in play, materialised afterwards:
the rows that failed are counted and set aside, the rest go on. Materialising between rounds keeps
Ray Data from re-running a paid round when the dataset is read twice (once for the rows that go
on, once for the counts), and lets a round with no rows (often the retry) skip starting an engine.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from squeez_ray.label import stages
from squeez_ray.label.engines import ENGINE_ERROR, Engine, HttpTeacherConfig, VllmTeacherConfig
from squeez_ray.label.file_teacher import NO_LABEL, FileTeacherConfig, file_label, load_labels
from squeez_ray.label.http_client import BAD_RESPONSE, BUDGET_EXHAUSTED, HTTP_ERROR, RETRIES_EXHAUSTED

log = logging.getLogger(__name__)

# Rows lost to the endpoint rather than to their content: not final, a rerun labels them again.
TRANSPORT_REASONS = frozenset({BUDGET_EXHAUSTED, HTTP_ERROR, RETRIES_EXHAUSTED, BAD_RESPONSE, ENGINE_ERROR})


@dataclass
class TeacherConfig:
    # rules (no LLM), http (a server), vllm (in-cluster), file
    engine: Literal["rules", "http", "vllm", "file"] = "rules"
    http: HttpTeacherConfig = field(default_factory=HttpTeacherConfig)
    vllm: VllmTeacherConfig = field(default_factory=VllmTeacherConfig)
    file: FileTeacherConfig = field(default_factory=FileTeacherConfig)  # hand labels (docs/HANDLABEL.md)
    content_first_retry: bool = True  # ask again, output first, when a positive gets no spans
    max_query_chars: int = 300  # longer teacher queries are dropped
    max_output_lines: int = 2000  # longer outputs are not sent to the teacher
    skip_errored: bool = True  # drop rows whose teacher call failed instead of writing them unlabelled

    def validate(self) -> list[str]:
        # http's own checks run as a nested dataclass; the vLLM model is only required when used
        if self.engine == "vllm" and not self.vllm.model:
            return ["vllm.model: required for engine vllm (a checkpoint directory or model id)"]
        if self.engine == "file" and not self.file.labels:
            return ["file.labels: required for engine file (label files or folders)"]
        return []

    def stage_settings(self) -> stages.StageSettings:
        return stages.StageSettings(self.max_query_chars, self.max_output_lines, self.skip_errored)


@dataclass
class LabelOutcome:
    dataset: Any  # ray.data.Dataset of working rows that passed every stage (materialised)
    dropped: Counter  # reason -> rows
    teacher_requests: int  # engine calls made for the rows (retries included)
    retried: int  # rows that went through the content-first retry
    recovered_by_retry: int
    # (instance_id, command) of rows lost to transport problems, which a rerun should try again
    retry_later: list[tuple[str, str]] = field(default_factory=list)
    # one detail per drop reason (e.g. the start of an invalid reply), for the manifest and debugging
    drop_examples: dict[str, str] = field(default_factory=dict)


def _count(ds: Any, retry_later: list | None = None, examples: dict | None = None) -> Counter:
    counts: Counter = Counter()
    columns = ["reject_reason", "reject_detail", "instance_id", "command"]
    for batch in ds.select_columns(columns).iter_batches(batch_format="pandas", batch_size=4096):
        for reason, detail, instance_id, command in zip(batch["reject_reason"], batch["reject_detail"],
                                                        batch["instance_id"], batch["command"]):
            if reason:
                counts[reason] += 1
                if examples is not None and reason not in examples:
                    examples[reason] = f"{instance_id}: {detail}"
                if retry_later is not None and reason in TRANSPORT_REASONS:
                    retry_later.append((instance_id, command))
    return counts


def _requests(ds: Any) -> int:
    return int(ds.sum("teacher_requests") or 0) if ds.count() else 0


def _round(ds: Any, engine: Engine, take: Any) -> Any:
    """Run ``engine`` over the rows that carry a request, then ``take`` the replies; materialised."""
    if ds.count() == 0:
        return ds
    return engine(ds).map(take).materialize()


def label_dataset(ds: Any, teacher: TeacherConfig, engine: Engine | None = None) -> LabelOutcome:
    """Label a dataset of observation rows (contract fields plus an optional ``background_task``)."""
    settings = teacher.stage_settings()
    ds = ds.map(lambda row: stages.prepare(row, settings)).materialize()
    seen: dict[str, str] = {}
    dropped = _count(ds, examples=seen)
    ds = ds.filter(lambda row: not row["reject_reason"])
    if teacher.engine == "rules":
        ds = ds.map(stages.rule_label).materialize()
        dropped += _count(ds, examples=seen)
        ok = ds.filter(lambda row: not row["reject_reason"]).materialize()
        return LabelOutcome(ok, dropped, 0, 0, 0, [], seen)
    if teacher.engine == "file":
        labels = load_labels(teacher.file)
        ds = ds.flat_map(lambda row: file_label(row, labels)).materialize()
        unlabelled: list[tuple[str, str]] = []
        dropped += _count(ds, examples=seen)
        for row in ds.filter(lambda row: row["reject_reason"] == NO_LABEL).iter_rows():
            unlabelled.append((row["instance_id"], row["command"]))  # a later label file may label it
        ok = ds.filter(lambda row: not row["reject_reason"]).materialize()
        return LabelOutcome(ok, dropped, 0, 0, 0, unlabelled, seen)
    if engine is None:
        raise ValueError(f"engine {teacher.engine!r} needs an engine transform")

    requests = 0
    later: list[tuple[str, str]] = []
    ds = _round(ds.map(lambda row: stages.query_request(row, settings)), engine,
                lambda row: stages.take_query(row, settings))
    dropped += _count(ds, later, seen)
    requests += _requests(ds)
    ds = ds.filter(lambda row: not row["reject_reason"]).map(lambda row: {**row, "teacher_requests": 0})
    ds = _round(ds.map(stages.spans_request), engine, stages.take_spans)
    requests += _requests(ds)

    retried = recovered = 0
    if teacher.content_first_retry:
        again = ds.filter(stages.needs_retry).map(lambda row: {**stages.clear_rejection(row), "teacher_requests": 0})
        again = _round(again.map(lambda row: stages.spans_request(row, retry=True)), engine, stages.take_spans)
        retried = again.count()
        if retried:
            requests += _requests(again)
            dropped += _count(again, later, seen)
            recovered = again.filter(lambda row: not row["reject_reason"]).count()
        dropped += _count(ds.filter(lambda row: not stages.needs_retry(row)), later, seen)
        ok = ds.filter(lambda row: not row["reject_reason"])
        if recovered:
            ok = ok.union(again.filter(lambda row: not row["reject_reason"]))
    else:
        dropped += _count(ds, later, seen)
        ok = ds.filter(lambda row: not row["reject_reason"])
    ok = ok.materialize()
    log.info("labelled %d rows; dropped %s; %d teacher requests; retry recovered %d of %d",
             ok.count(), dict(dropped), requests, recovered, retried)
    return LabelOutcome(ok, dropped, requests, retried, recovered, later, seen)


def label_rows_with_rules(rows: list[dict[str, Any]], teacher: TeacherConfig | None = None,
                          ) -> tuple[list[dict[str, Any]], Counter]:
    """The rule teacher in-process, with the same row functions as the Ray path (small jobs, sample data)."""
    settings = (teacher or TeacherConfig()).stage_settings()
    kept: list[dict[str, Any]] = []
    dropped: Counter = Counter()
    for observation in rows:
        row = stages.rule_label(stages.prepare(observation, settings))
        if row["reject_reason"]:
            dropped[row["reject_reason"]] += 1
        else:
            kept.append(row)
    return kept, dropped
