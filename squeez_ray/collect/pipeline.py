"""The collection job: instances in, raw tool observations (Parquet) and manifest.json out, on Ray Data.

Shape: the driver reads and checks the instances, finds what earlier runs already wrote, and hands
the instances (sorted by repository, so one worker keeps reusing one checkout) to an actor pool via
``map_batches``. Each actor (:class:`CollectWorker`) owns a :class:`RepoCache` and, per batch of
instances: plans the calls, checks out the base commit, runs every call not yet written, and writes
the batch's observations as one Parquet shard, atomically. It returns one small summary row per call,
which the driver folds into manifest.json.

Resume: a shard appears whole or not at all, and the plan is a pure function of (seed, instance,
files), so a re-run re-plans the same calls, skips every (instance_id, command) already in a shard and
writes new shards only for the rest. Inputs (instances file, mirrors) are never written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.collect.tools import TOOL_TYPES
from squeez_ray.ray_init import init_ray
from squeez_ray.errors import JobError

log = logging.getLogger(__name__)
SHARD_DIR = "observations"
MAX_FAILURES_LISTED = 200
_NO_NAMESPACE = ("no network namespace can be created on this node (unshare --net failed), so tools could reach "
                 "the network; set require_network_isolation=false to run with the dead-proxy trap only")


class CollectError(JobError, RuntimeError):  # JobError: the job runner reports it as one line, exit 2
    """The job cannot run as configured (no network isolation, unreadable earlier output)."""


@dataclass
class CollectConfig:
    """Everything the collection job needs; loaded with squeez_ray.config.load_config."""

    instances: str | None = None  # SWE-bench-format instances file (.jsonl / .json / .parquet); read only
    mirrors: str | None = None  # folder of <owner>__<name>.git bare mirrors; read only
    output_dir: str | None = None  # observations/part-*.parquet and manifest.json go here
    seed: int = 0  # same seed -> same plan -> resumable
    min_calls: int = 3  # tool calls planned per instance, at least
    max_calls: int = 7  # tool calls planned per instance, at most
    tool_types: list[str] = field(default_factory=lambda: list(TOOL_TYPES))  # tool types the plan draws from
    decoy_rate: float = 0.25  # share of calls aimed at unrelated files/names (realistic noise)
    apply_test_patch: bool = True  # run tests as SWE-bench evaluation does: failing tests present
    keep_empty: bool = False  # write observations whose output is empty (a grep with no match)?
    timeout_s: float = 60.0  # per tool call; the whole process group is killed after it
    max_output_bytes: int = 1 << 20  # per tool call; the rest is not read and truncated=True
    workers: int = 2  # actor pool size; each keeps its own checkouts
    cpus_per_worker: float = 0.5  # tools are mostly I/O and short; fractional CPUs pack more actors
    instances_per_shard: int = 4  # instances per map_batches batch = per Parquet shard (resume unit)
    work_dir: str | None = None  # where actors keep checkouts (default: the node's temp dir)
    max_cached_repos: int = 4  # checkouts kept per actor (LRU)
    require_network_isolation: bool = True  # refuse to run tools where no network namespace is possible
    limit: int | None = None  # only the first N instances (debugging)
    ray_address: str | None = None  # None: the job's cluster (RAY_ADDRESS) or a new local Ray

    def validate(self) -> list[str]:
        problems = []
        for name in ("instances", "mirrors", "output_dir"):
            if not getattr(self, name):
                problems.append(f"{name}: required, no value given")
        if self.instances and not Path(self.instances).is_file():
            problems.append(f"instances: {self.instances} is not a file")
        if self.mirrors and not Path(self.mirrors).is_dir():
            problems.append(f"mirrors: {self.mirrors} is not a folder")
        if not 1 <= self.min_calls <= self.max_calls:
            problems.append(f"min_calls/max_calls: need 1 <= min_calls <= max_calls, got {self.min_calls}, {self.max_calls}")
        unknown = sorted(set(self.tool_types) - set(TOOL_TYPES))
        if unknown or not self.tool_types:
            problems.append(f"tool_types: {unknown or 'empty'} not allowed (choose from {', '.join(TOOL_TYPES)})")
        if not 0.0 <= self.decoy_rate <= 1.0:
            problems.append(f"decoy_rate: {self.decoy_rate} is not between 0 and 1")
        for name in ("timeout_s", "cpus_per_worker"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}: must be > 0, got {getattr(self, name)}")
        for name, low in (("max_output_bytes", 1024), ("workers", 1), ("instances_per_shard", 1), ("max_cached_repos", 1)):
            if getattr(self, name) < low:
                problems.append(f"{name}: must be >= {low}, got {getattr(self, name)}")
        if self.limit is not None and self.limit < 1:
            problems.append(f"limit: must be >= 1 or null, got {self.limit}")
        return problems


def done_commands(output_dir: str | Path) -> dict[str, set[str]]:
    """instance_id -> commands already written by earlier runs (read from the shards, two columns only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from squeez_ray.schema import DataError

    done: dict[str, set[str]] = defaultdict(set)
    for shard in sorted((Path(output_dir) / SHARD_DIR).glob("part-*.parquet")):
        try:
            table = pq.read_table(shard, columns=["instance_id", "command"])
        except (OSError, pa.ArrowException) as error:
            raise DataError(f"earlier output cannot be read ({error}); move it away to re-collect its instances",
                            path=shard) from None
        for iid, command in zip(table.column("instance_id").to_pylist(), table.column("command").to_pylist(), strict=True):
            done[iid].add(command)
    return done


class CollectWorker:
    """One Ray Data actor: a private repository cache and the tools, for many batches of instances."""

    def __init__(self, config: dict[str, Any], run_id: str):
        from squeez_ray.collect.sandbox import network_isolation
        from squeez_ray.collect.workspace import RepoCache

        self.config = CollectConfig(**config)
        self.run_id = run_id
        self.isolation = network_isolation()
        if self.config.require_network_isolation and not self.isolation.startswith("unshare"):
            raise CollectError(_NO_NAMESPACE)
        base = Path(self.config.work_dir or tempfile.gettempdir()) / "squeez-collect" / run_id
        base.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="worker-", dir=base))
        self.cache = RepoCache(self.root / "repos", self.config.mirrors, max_repos=self.config.max_cached_repos)
        self.tool_cache = self.root / "tool-cache"
        self.shard_dir = Path(self.config.output_dir) / SHARD_DIR

    def __call__(self, batch):
        import pyarrow as pa

        summaries: list[dict[str, Any]] = []
        observations: list[dict[str, Any]] = []
        for instance in batch.to_pylist():
            instance["FAIL_TO_PASS"] = json.loads(instance["FAIL_TO_PASS"])
            done = set(json.loads(instance.pop("done_commands")))
            observations += self._collect_instance(instance, done, summaries)
        shard = None
        if observations:
            from squeez_ray.schema import write_observations

            digest = hashlib.sha1("\n".join(sorted({o["instance_id"] for o in observations})).encode()).hexdigest()
            shard = self.shard_dir / f"part-{self.run_id}-{digest[:12]}.parquet"
            write_observations(observations, shard)  # atomic: temp file in the same folder, then rename
        for row in summaries:
            row["shard"] = shard.name if shard and row["status"] == "written" else None
        return pa.Table.from_pylist(summaries, schema=_summary_schema())

    def _collect_instance(self, instance: dict[str, Any], done: set[str], summaries: list[dict[str, Any]]) -> list:
        import shlex

        from squeez_ray.collect.plan import plan_calls
        from squeez_ray.collect.tools import build_command, run_tool
        from squeez_ray.collect.workspace import WorkspaceError

        iid, repo, commit = instance["instance_id"], instance["repo"], instance["base_commit"]
        cfg = self.config

        def note(tool_type: str | None, status: str, error: str | None = None, **extra: Any) -> None:
            summaries.append({"instance_id": iid, "tool_type": tool_type, "status": status, "error": error,
                              "duration_s": extra.get("duration_s", 0.0), "truncated": extra.get("truncated", False),
                              "exit_code": extra.get("exit_code"), "shard": None})

        try:
            files = self.cache.files(repo, commit)
            calls = plan_calls(instance, files, seed=cfg.seed, history_depth=self.cache.history_depth(repo, commit),
                               min_calls=cfg.min_calls, max_calls=cfg.max_calls, tool_types=cfg.tool_types,
                               decoy_rate=cfg.decoy_rate)
            worktree, patch_note = self.cache.checkout(repo, commit, instance["test_patch"] if cfg.apply_test_patch else "")
        except WorkspaceError as error:
            note(None, "instance_failed", str(error))
            return []
        if patch_note:
            note(None, "test_patch_failed", patch_note)
        if not calls:
            note(None, "no_calls", "nothing in this repository to aim a tool at")
        rows = []
        for call in calls:
            try:
                command = shlex.join(build_command(call.tool_type, call.args, worktree, cache_dir=self.tool_cache).argv)
            except ValueError as error:  # unsafe path (symlink out of the tree) or malformed argument
                note(call.tool_type, "rejected", f"{type(error).__name__}: {error}")
                continue
            if command in done:
                note(call.tool_type, "skipped")
                continue
            obs = run_tool(call.tool_type, call.args, worktree, cfg.timeout_s, cfg.max_output_bytes,
                           cache_dir=self.tool_cache)
            if obs["exit_code"] is None:  # never started: not an observation of the tool
                note(call.tool_type, "error", obs["error"])
                continue
            if not obs["tool_output"].strip() and not cfg.keep_empty:
                # Nothing to prune or label; not written, so a resumed run runs it again (cheap).
                note(call.tool_type, "empty", None, duration_s=obs["duration_s"], exit_code=obs["exit_code"])
                continue
            rows.append({"instance_id": iid, "repo": repo, "base_commit": commit, **obs})
            note(call.tool_type, "written", obs["error"], duration_s=obs["duration_s"], truncated=obs["truncated"],
                 exit_code=obs["exit_code"])
        return rows

    def __del__(self):
        shutil.rmtree(getattr(self, "root", ""), ignore_errors=True)


def _summary_schema():
    import pyarrow as pa

    return pa.schema([("instance_id", pa.string()), ("tool_type", pa.string()), ("status", pa.string()),
                      ("error", pa.string()), ("duration_s", pa.float64()), ("truncated", pa.bool_()),
                      ("exit_code", pa.int64()), ("shard", pa.string())])


def collect(config: CollectConfig) -> dict[str, Any]:
    """Run the collection job; returns the manifest it wrote to ``output_dir/manifest.json``."""
    import ray

    from squeez_ray.schema.instances import read_instances
    from squeez_ray.collect.sandbox import network_isolation
    from squeez_ray.config import to_dict
    from squeez_ray.io_utils import git_revision, write_json_atomic

    started = time.time()
    if config.require_network_isolation and not network_isolation().startswith("unshare"):
        # Checked here too so the common single-node case fails in one line, before any actor starts.
        raise CollectError(_NO_NAMESPACE)
    instances = read_instances(config.instances)[: config.limit or None]
    output_dir = Path(config.output_dir)
    done = done_commands(output_dir)
    already = sum(len(v) for v in done.values())
    rows = [{"instance_id": i["instance_id"], "repo": i["repo"], "base_commit": i["base_commit"],
             "problem_statement": i["problem_statement"], "patch": i["patch"], "test_patch": i["test_patch"],
             # JSON text, not lists: Arrow infers list<null> for an empty list and blocks would disagree.
             "FAIL_TO_PASS": json.dumps(i["FAIL_TO_PASS"]), "done_commands": json.dumps(sorted(done.get(i["instance_id"], ())))}
            for i in sorted(instances, key=lambda i: (i["repo"], i["base_commit"], i["instance_id"]))]
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    init_ray(config.ray_address)
    summaries: list[dict[str, Any]] = []
    if rows:
        dataset = ray.data.from_items(rows).map_batches(
            CollectWorker, fn_constructor_kwargs={"config": asdict(config), "run_id": run_id},
            batch_size=config.instances_per_shard, batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=config.workers), num_cpus=config.cpus_per_worker)
        from squeez_ray.progress import Progress

        with Progress("collect", unit="tool calls") as progress:
            for row in dataset.iter_rows():
                summaries.append(row)
                progress.update(1, written=progress.fields.get("written", 0) + (row["status"] == "written"))
    if config.work_dir is None:  # local run: remove this run's checkouts (remote nodes clean their temp dirs)
        shutil.rmtree(Path(tempfile.gettempdir()) / "squeez-collect" / run_id, ignore_errors=True)
    else:
        shutil.rmtree(Path(config.work_dir) / "squeez-collect" / run_id, ignore_errors=True)
    manifest = {
        "job": "collect",
        "run_id": run_id,
        "git_revision": git_revision(),
        "inputs": {"instances": str(Path(config.instances).resolve()), "mirrors": str(Path(config.mirrors).resolve())},
        "config": to_dict(config),
        "network_isolation": network_isolation(),
        "wall_s": round(time.time() - started, 3),
        **summarize(summaries, instances=len(rows), already_written=already),
    }
    write_json_atomic(output_dir / "manifest.json", manifest)
    log.info("collect: %d observation(s) written, %d already there, %d failure(s); manifest in %s",
             manifest["counts"]["observations_written"], already, manifest["failure_count"], output_dir)
    return manifest


def summarize(summaries: list[dict[str, Any]], *, instances: int, already_written: int) -> dict[str, Any]:
    """Manifest counts from the per-call summary rows."""
    by_type: dict[str, Counter] = defaultdict(Counter)
    failures = []
    for row in summaries:
        status = row["status"]
        if row["tool_type"]:
            counter = by_type[row["tool_type"]]
            counter[status] += 1
            if status == "written":
                counter["truncated"] += bool(row["truncated"])
                counter["nonzero_exit"] += row["exit_code"] not in (0, None)
                counter["timeouts"] += bool(row["error"])
        if status not in ("written", "skipped", "empty") or row["error"]:
            failures.append({k: row[k] for k in ("instance_id", "tool_type", "status", "error")})
    written = [r for r in summaries if r["status"] == "written"]
    return {
        "counts": {
            "instances": instances,
            "instances_failed": sum(r["status"] == "instance_failed" for r in summaries),
            "observations_written": len(written),
            "observations_skipped_already_written": sum(r["status"] == "skipped" for r in summaries),
            "observations_total": already_written + len(written),
            "calls_rejected": sum(r["status"] == "rejected" for r in summaries),
            "empty_outputs_not_written": sum(r["status"] == "empty" for r in summaries),
            "tool_time_s": round(sum(r["duration_s"] or 0.0 for r in written), 3),
            "by_tool_type": {tt: dict(sorted(c.items())) for tt, c in sorted(by_type.items())},
        },
        "shards_written": sorted({r["shard"] for r in written if r["shard"]}),
        "failure_count": len(failures),
        "failures": failures[:MAX_FAILURES_LISTED],
    }
