"""Re-prune a group of units (files or V1 conversation directories) with one pruner: load, find the
observations, prune them all in backend-sized batches (across files), write each unit atomically,
then its done-marker. No Ray here: the Ray Data actor, the plain-loop benchmark and unit tests
all call ``process_units``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from squeez_ray.infer.base import Pruner, PruneRequest, RenderOptions
from squeez_ray.io_utils import write_bytes_atomic, write_json_atomic
from squeez_ray.trajectories.base import TOO_DEEP, Observation, TrajectoryParseError
from squeez_ray.trajectories.resume import input_digest
from squeez_ray.trajectories.detect import (
    ADAPTERS,
    detect_format,
    looks_like_trajectory,
)
from squeez_ray.trajectories.verify import check_written
from squeez_ray.trajectories.resume import STATE_DIR, file_sha256, marker_path  # the done markers live with resume

log = logging.getLogger(__name__)

QuerySource = Literal["thought", "action", "task", "fixed"]
# Test hook: seconds to sleep before writing each unit, so a test can kill a run mid-way.
DELAY_ENV = "SQUEEZ_REPRUNE_DELAY_PER_FILE_S"


@dataclass
class RepruneSettings:
    input_dir: str
    output_dir: str
    format: str | None = None  # None: detect per file from content
    query_source: QuerySource = "thought"
    query: str | None = None  # the fixed query, and the fallback when a run offers none
    min_lines: int = 10
    markers: bool = True  # "... [N lines omitted]" where lines were cut
    batch_size: int = 64  # observations per pruner call
    max_query_chars: int = 2000  # task statements can be pages long; the query needs the gist


@dataclass
class UnitStats:
    unit: str
    format: str | None
    status: str  # "pruned" (written through the adapter) | "copied" (not a run) | "failed" (could not parse)
    error: str | None = None
    observations: int = 0
    pruned: int = 0
    passed_through: int = 0
    failed: int = 0
    lines_before: int = 0
    lines_after: int = 0
    tokens_before: int = 0  # the served model's tokenizer when one is given, else characters / 4
    tokens_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0
    failures: list[dict[str, str]] = field(default_factory=list)
    input_sha256: str | None = None  # the input this record was made from: a rerun redoes a changed input
    reasons: dict[str, int] = field(default_factory=dict)  # why observations passed through


def build_query(obs: Observation, source: QuerySource, fixed: str | None, max_chars: int) -> str | None:
    """The query for one observation; falls back along thought/action -> the run's task -> ``fixed``."""
    call = " ".join(p for p in (obs.tool, obs.args) if p) or None
    chains = {
        "thought": [obs.next_thought, obs.thought, obs.task],
        "action": [obs.next_action, call, obs.task],
        "task": [obs.task],
        "fixed": [],
    }
    for candidate in [*chains[source], fixed]:
        if candidate and candidate.strip():
            return candidate.strip()[:max_chars]
    return None


def split_trailing_newline(text: str) -> tuple[str, str]:
    """Tool output usually ends with "\\n": prune the lines, then put the newline back after them."""
    return (text[:-1], "\n") if text.endswith("\n") else (text, "")


def chars_over_4(text: str) -> int:
    return round(len(text) / 4)


def process_units(units: list[str], pruner: Pruner, settings: RepruneSettings,
                  count_tokens: Callable[[str], int] = chars_over_4) -> list[UnitStats]:
    started = time.perf_counter()
    loaded: list[tuple[UnitStats, Any, Any, list[Observation]]] = []
    stats_list: list[UnitStats] = []
    for unit in units:
        stats, adapter, doc, observations = _load(unit, settings)
        stats_list.append(stats)
        if adapter is not None:
            loaded.append((stats, adapter, doc, observations))

    # Every observation of every loaded unit goes into one request list, so the engine sees full batches.
    todo: list[tuple[UnitStats, Any, Any, Observation, str, str, str]] = []
    for stats, adapter, doc, observations in loaded:
        for obs in observations:
            body, tail = split_trailing_newline(obs.text)
            stats.observations += 1
            stats.lines_before += len(body.split("\n"))
            stats.tokens_before += count_tokens(body)
            reason = obs.skip_reason
            query = build_query(obs, settings.query_source, settings.query, settings.max_query_chars)
            if reason is None and len(body.split("\n")) < settings.min_lines:
                reason = f"below min_lines={settings.min_lines}"
            if reason is None and query is None:
                reason = "no query (the run has no thought/task here and no --query was given)"
            if reason is not None:
                _pass_through(stats, body, reason, count_tokens)
                continue
            todo.append((stats, adapter, doc, obs, body, tail, query))

    render = RenderOptions(markers=settings.markers)
    for start in range(0, len(todo), settings.batch_size):
        chunk = todo[start:start + settings.batch_size]
        outcomes = _prune_chunk(pruner, [PruneRequest(query, body) for _, _, _, _, body, _, query in chunk], render)
        for (stats, adapter, doc, obs, body, tail, _), outcome in zip(chunk, outcomes):
            if isinstance(outcome, str):  # the backend raised for this observation: it stays as it was
                _failed(stats, obs, body, outcome, count_tokens)
            elif not outcome.pruned or outcome.text == body:
                _pass_through(stats, body, outcome.reason or "kept every line", count_tokens)
            else:
                try:
                    adapter.set_observation(doc, obs, outcome.text + tail)
                except Exception as error:  # adapters check before they change anything: the file stays consistent
                    log.exception("%s %s: write-back failed", stats.unit, obs.where)
                    _failed(stats, obs, body, f"write-back: {type(error).__name__}: {error}", count_tokens)
                    continue
                stats.pruned += 1
                stats.lines_after += len(outcome.text.split("\n"))
                stats.tokens_after += count_tokens(outcome.text)

    delay = float(os.environ.get(DELAY_ENV, "0") or 0)
    for stats, adapter, doc, _ in loaded:
        if delay:
            time.sleep(delay)
        try:
            stats.bytes_after = _write(adapter, doc, stats, settings)
        except Exception as error:  # a write-back bug must not lose the file: report it and copy the input
            log.exception("writing %s failed; copying the input unchanged", stats.unit)
            stats.status, stats.error = "failed", f"write-back failed: {type(error).__name__}: {error}"
            stats.passed_through, stats.pruned = stats.passed_through + stats.pruned, 0
            stats.lines_after, stats.tokens_after = stats.lines_before, stats.tokens_before
    for stats in stats_list:
        if stats.status != "pruned":
            if delay:
                time.sleep(delay)
            stats.bytes_after = _copy_unit(stats.unit, settings)
    per_unit = (time.perf_counter() - started) / max(1, len(units))
    for stats in stats_list:
        stats.seconds = round(per_unit, 4)
        write_json_atomic(marker_path(settings.output_dir, stats.unit), asdict(stats) | {
            "output_sha256": file_sha256(Path(settings.output_dir) / stats.unit)})
    return stats_list


def _pass_through(stats: UnitStats, body: str, reason: str, count_tokens: Callable[[str], int]) -> None:
    stats.passed_through += 1
    stats.reasons[reason] = stats.reasons.get(reason, 0) + 1
    stats.lines_after += len(body.split("\n"))
    stats.tokens_after += count_tokens(body)


def _failed(stats: UnitStats, obs: Observation, body: str, error: str, count_tokens: Callable[[str], int]) -> None:
    stats.failed += 1
    stats.failures.append({"where": obs.where, "error": error})
    stats.lines_after += len(body.split("\n"))
    stats.tokens_after += count_tokens(body)


def _load(unit: str, settings: RepruneSettings) -> tuple[UnitStats, Any, Any, list[Observation]]:
    path = Path(settings.input_dir) / unit
    # Digest before reading: if the input changes meanwhile, the record names the older content and
    # the next run redoes the unit (never the reverse).
    stats = UnitStats(unit=unit, format=None, status="copied", bytes_before=_size(path),
                      input_sha256=input_digest(path))
    name = settings.format or detect_format(path)
    if name is None:
        if looks_like_trajectory(path):
            stats.status, stats.error = "failed", _why_unreadable(path)
        return stats, None, None, []
    stats.format = name
    adapter = ADAPTERS[name]
    try:
        doc = adapter.load(path)
        observations = adapter.iter_observations(doc)
    except (TrajectoryParseError, OSError) as error:
        stats.status, stats.error = "failed", str(error)
        return stats, None, None, []
    except Exception as error:  # an adapter bug on odd input: report the file, copy it, go on
        log.exception("reading %s as %s failed", unit, name)
        stats.status, stats.error = "failed", f"{name} adapter could not read it: {type(error).__name__}: {error}"
        return stats, None, None, []
    stats.status = "pruned"
    return stats, adapter, doc, observations


def _why_unreadable(path: Path) -> str:
    """A one-line reason for a .json/.jsonl/.traj file that no adapter recognised."""
    import json

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        return f"{path}: not UTF-8 (byte {error.start}: {error.reason})"
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"{path}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
    except RecursionError:
        return f"{path}: {TOO_DEEP}"
    return f"{path}: JSON of no known trajectory format"


def _prune_chunk(pruner: Pruner, requests: list[PruneRequest], render: RenderOptions) -> list[Any]:
    """Results, or an error string per request that failed. A failed batch is retried one by one
    so one bad observation does not fail its neighbours."""
    try:
        return pruner.prune_batch(requests, render_options=render, fail_open=False)
    except Exception as error:  # noqa: BLE001 - any backend error is counted per observation, never raised
        if len(requests) == 1:
            return [f"{type(error).__name__}: {error}"]
        log.warning("batch of %d failed (%s); retrying one by one", len(requests), error)
    return [_prune_chunk(pruner, [request], render)[0] for request in requests]


def _write(adapter: Any, doc: Any, stats: UnitStats, settings: RepruneSettings) -> int:
    unit = stats.unit
    target = Path(settings.output_dir) / unit
    dumped = adapter.dump(doc)
    if stats.pruned:  # prove only observation strings changed before anything is written
        problems = check_written(adapter.NAME, Path(settings.input_dir) / unit, dumped)
        if problems:
            raise ValueError(f"the rewritten file would change more than observations: {'; '.join(problems[:3])}")
    if isinstance(dumped, bytes):
        write_bytes_atomic(target, dumped)
        return len(dumped)
    return _write_dir(unit, settings, dumped)


def _copy_unit(unit: str, settings: RepruneSettings) -> int:
    source = Path(settings.input_dir) / unit
    if source.is_dir():
        return _write_dir(unit, settings, {})
    data = source.read_bytes()
    write_bytes_atomic(Path(settings.output_dir) / unit, data)
    return len(data)


def _write_dir(unit: str, settings: RepruneSettings, replaced: dict[str, bytes]) -> int:
    """Build the whole directory beside the output, then rename it into place (a directory appears whole)."""
    source, target = Path(settings.input_dir) / unit, Path(settings.output_dir) / unit
    staging = Path(settings.output_dir) / STATE_DIR / "tmp" / uuid.uuid4().hex
    total = 0
    for file in sorted(source.rglob("*")):
        if file.is_file():
            relative = file.relative_to(source).as_posix()
            data = replaced.get(relative, None)
            data = file.read_bytes() if data is None else data
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_bytes(data)
            total += len(data)
    if target.exists():  # left by a run killed before its marker was written: ours to replace
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, target)
    return total


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size
