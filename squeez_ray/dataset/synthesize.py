"""Synthetic multi-ecosystem outputs: the teacher writes an output per (family, scenario), then the
same two-stage labelling as real observations labels it.

Real collection only reaches Python repositories; the families (npm, cargo, go, mvn, docker,
kubectl, terraform, ...) teach the pruner other ecosystems' formats. Rows carry ``source``
``synthetic``, ``instance_id`` ``synth:<family>:<n>`` and split group ``synth-group:<group>``.
"""

from __future__ import annotations

import os

import dataclasses
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.label.pipeline import TeacherConfig
from squeez_ray.ray_init import init_ray
from squeez_ray.errors import JobError

log = logging.getLogger(__name__)

SOURCE = "synthetic"
GROUP_PREFIX = "synth-group:"


class SynthError(JobError, ValueError):  # JobError: the job runner reports it as one line, exit 2
    pass


@dataclass(frozen=True)
class Family:
    name: str
    group: str
    ecosystem: str
    tool: str
    tool_type: str
    scenarios: tuple[str, ...]


@dataclass
class SynthesizeConfig:
    families: str = "jobs/configs/synth_families.yaml"  # YAML of the tool families to write
    output_dir: str | None = None  # synthetic/ and labelled/ parts and manifest.json go here
    per_family: int = 20  # outputs written per family
    only_families: list[str] | None = None  # only these family names; None: all
    min_lines: int = 15  # synthetic outputs shorter than this are dropped
    max_lines: int = 120  # synthetic outputs longer than this are dropped
    synth_temperature: float = 0.8  # sampling temperature when writing outputs
    seed: int = 0  # seeds scenario order
    ray_address: str | None = None  # Ray cluster to join; None: RAY_ADDRESS, else a local Ray
    teacher: TeacherConfig = field(default_factory=lambda: TeacherConfig(engine="http"))

    def validate(self) -> list[str]:
        problems = [] if self.output_dir else ["output_dir: required"]
        if self.teacher.engine == "rules":
            problems.append("teacher.engine: rules cannot write outputs; use http or vllm")
        if self.per_family < 1 or not 1 <= self.min_lines <= self.max_lines:
            problems.append(f"per_family >= 1 and 1 <= min_lines <= max_lines needed, got {self.per_family}, "
                            f"{self.min_lines}, {self.max_lines}")
        return problems


def load_families(path: str | Path) -> list[Family]:
    """Families from YAML; every problem is reported at once, naming the entry and key."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SynthError(f"{path}: families file does not exist") from None
    entries = data.get("families") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise SynthError(f"{path}: expected a mapping with a non-empty 'families' list")
    problems, families, seen = [], [], set()
    keys = ("name", "group", "ecosystem", "tool", "tool_type")
    for i, entry in enumerate(entries):
        where = f"{path}: families[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a mapping, got {entry!r}")
            continue
        missing = [k for k in (*keys, "scenarios") if not entry.get(k)]
        unknown = sorted(set(entry) - {*keys, "scenarios"})
        if missing or unknown:
            problems.append(f"{where} ({entry.get('name')}): missing {missing} / unknown keys {unknown}")
            continue
        if entry["name"] in seen:
            problems.append(f"{where}: duplicate family name {entry['name']!r}")
        seen.add(entry["name"])
        scenarios = entry["scenarios"]
        if not isinstance(scenarios, list) or not all(isinstance(s, str) and s for s in scenarios):
            problems.append(f"{where} ({entry['name']}): scenarios must be a list of non-empty strings")
            continue
        families.append(Family(*(str(entry[k]) for k in keys), tuple(scenarios)))
    if problems:
        raise SynthError("invalid families:\n  - " + "\n  - ".join(problems))
    return families


def plan_rows(families: list[Family], config: SynthesizeConfig, done: set[str]) -> list[dict[str, Any]]:
    from squeez_ray.label.prompts import synth_messages

    chosen = [f for f in families if not config.only_families or f.name in config.only_families]
    unknown = set(config.only_families or ()) - {f.name for f in families}
    if unknown:
        raise SynthError(f"only_families: unknown families {sorted(unknown)}")
    rows = []
    for family in chosen:
        for k in range(config.per_family):
            instance_id = f"synth:{family.name}:{k:04d}"
            if instance_id in done:
                continue
            scenario = family.scenarios[k % len(family.scenarios)]
            # the variant number keeps replies to the same scenario apart (and rows reproducible by id)
            variant = f"{scenario} (variant {k // len(family.scenarios) + 1}, seed {config.seed})"
            messages = synth_messages(family.name, family.tool, family.ecosystem, variant, config.min_lines,
                                      config.max_lines)
            rows.append({"instance_id": instance_id, "family": family.name, "group": family.group,
                         "tool_type": family.tool_type, "tool": family.tool, "scenario": scenario,
                         "teacher_request": json.dumps(messages), "teacher_reply": "", "teacher_error": "",
                         "teacher_error_detail": "", "teacher_requests": 0})
    return rows


def _as_observation(row: dict[str, Any], min_lines: int) -> dict[str, Any]:
    from squeez_ray.label import parse

    base = {"instance_id": row["instance_id"], "repo": f"synthetic/{row['group']}", "tool_type": row["tool_type"],
            "background_task": row["scenario"], "error": None, "command": row["tool"], "tool_output": "",
            "write_reject": ""}
    if row["teacher_error"]:
        return {**base, "write_reject": row["teacher_error"]}
    reply = parse.parse_synth_reply(row["teacher_reply"], min_lines)
    if isinstance(reply, parse.Rejection):
        return {**base, "write_reject": reply.reason}
    return {**base, "command": reply.command or row["tool"], "tool_output": reply.tool_output}


def synthesize(config: SynthesizeConfig, engine: Any = None) -> dict[str, Any]:
    """``engine``: a vLLM teacher already started (label.vllm_teacher.VllmTeacher) to write and label with,
    left running; None: the config's teacher, its engine stopped at the end."""
    import ray

    from squeez_ray.config import to_dict
    from squeez_ray.io_utils import git_revision, write_json_atomic
    from squeez_ray.label.job import _engine
    from squeez_ray.label.pipeline import label_dataset
    from squeez_ray.label.stages import to_example
    from squeez_ray.schema import write_examples

    started = time.time()
    out = Path(config.output_dir)  # type: ignore[arg-type]
    families = load_families(config.families)
    done_files = sorted((out / "done").glob("part-*.json"))
    done = {i for f in done_files for i in json.loads(f.read_text())["settled"]}
    rows = plan_rows(families, config, done)
    init_ray(config.ray_address)
    # writing and labelling share one endpoint (vLLM: one engine) and budget; only the temperature differs
    writer_teacher = dataclasses.replace(config.teacher, http=dataclasses.replace(
        config.teacher.http, temperature=config.synth_temperature))
    label_engine, budget = (engine, None) if engine is not None else _engine(_Job(config.teacher))
    write_engine = (label_engine.sampling(temperature=config.synth_temperature) if config.teacher.engine == "vllm"
                    else _http_writer(writer_teacher, budget))
    dropped: Counter = Counter()
    examples: list[dict[str, Any]] = []
    later: set[str] = set()
    if rows:
        written = write_engine(ray.data.from_items(rows)).map(
            lambda row: _as_observation(row, config.min_lines)).materialize()
        for batch in written.select_columns(["write_reject", "instance_id"]).iter_rows():
            if batch["write_reject"]:
                dropped[f"write:{batch['write_reject']}"] += 1
                if batch["write_reject"] in ("budget_exhausted", "retries_exhausted", "http_error", "bad_response"):
                    later.add(batch["instance_id"])
        observations = written.filter(lambda row: not row["write_reject"])
        outcome = label_dataset(observations, config.teacher, label_engine)
        dropped += outcome.dropped
        later |= {key[0] for key in outcome.retry_later}
        for row in outcome.dataset.iter_rows():
            example = to_example(row, SOURCE)
            example["split_group_id"] = GROUP_PREFIX + row["repo"].split("/", 1)[1]
            examples.append(example)
        part = f"part-{len(done_files):05d}"
        write_examples(examples, out / "labelled" / f"{part}.parquet")
        write_json_atomic(out / "done" / f"{part}.json",
                          {"settled": [r["instance_id"] for r in rows if r["instance_id"] not in later]})
    if budget is not None:
        ray.kill(budget)
    if engine is None and hasattr(label_engine, "close"):
        label_engine.close()
    manifest = {"job": "synthesize", "config": to_dict(config), "git_revision": git_revision(),
                "inputs": {"families": str(config.families)},
                "counts": {"families": len(families), "planned": len(rows), "already_done": len(done),
                           "labelled": len(examples), "left_for_rerun": len(later),
                           "by_family": dict(Counter(e["instance_id"].split(":")[1] for e in examples))},
                "dropped": dict(dropped), "seconds": round(time.time() - started, 2)}
    write_json_atomic(out / "manifest.json", manifest)
    return manifest


@dataclass
class _Job:  # the slice of LabelConfig that label.job._engine reads
    teacher: TeacherConfig


def _http_writer(teacher: TeacherConfig, budget: Any) -> Any:

    from squeez_ray.label.engines import http_engine

    return http_engine(teacher.http, os.environ.get(teacher.http.api_key_env), budget)
