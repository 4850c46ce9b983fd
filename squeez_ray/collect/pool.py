"""The pool of raw tool outputs a labeller reads: one row per real tool run, never edited.

A pool row is the raw-observation contract plus what a datasheet needs::

    output_id    "<source>:<sha1(command + "\\n" + tool_output)[:10]>": stable, and it proves the
                 output was not edited after collection (``check_digest``)
    source       the project the output comes from ("pypi:six", "npm:zod", "logs:postgresql");
                 the split group, so one source never crosses train/dev/test
    family       the tool family (``FAMILIES``), the unit of coverage and of the per-family tables
    command, cwd, exit_code, tool_output, versions, licence, collected_at

Pool files are JSONL (what collectors append) or Parquet (what the repository stores, zstd).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from squeez_ray.collect.sources.reserved import reserved_use
from squeez_ray.schema import DataError

# The tool families of LABELLING.md's coverage list, named as the public cases name their tools.
FAMILIES = ("read_file", "grep", "git_log", "git_blame", "git_diff", "test_output", "python_traceback",
            "pip_install", "lint", "type_check", "ls_find", "build_output", "logs")

POOL_SCHEMA = pa.schema([
    pa.field("output_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("family", pa.string(), nullable=False),
    pa.field("command", pa.string(), nullable=False),
    pa.field("cwd", pa.string()),
    pa.field("exit_code", pa.int32()),
    pa.field("tool_output", pa.string(), nullable=False),
    pa.field("versions", pa.string()),
    pa.field("licence", pa.string()),
    pa.field("collected_at", pa.string()),
])
POOL_FIELDS = tuple(POOL_SCHEMA.names)
REQUIRED = ("output_id", "source", "family", "command", "tool_output")


def output_digest(command: str, tool_output: str) -> str:
    return hashlib.sha1(f"{command}\n{tool_output}".encode("utf-8", "surrogatepass")).hexdigest()[:10]


def make_output_id(source: str, command: str, tool_output: str) -> str:
    return f"{source}:{output_digest(command, tool_output)}"


def check_digest(row: Mapping[str, Any]) -> bool:
    """True when the row's output is still the one its id was made from (nothing edited since)."""
    return row["output_id"] == make_output_id(row["source"], row["command"], row["tool_output"])


def check_pool_row(raw: Mapping[str, Any], *, path: str | Path | None = None, row: int | None = None) -> dict[str, Any]:
    for name in REQUIRED:
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise DataError("missing or not text (required)", path=path, row=row, field=name)
    if raw["family"] not in FAMILIES:
        raise DataError(f"unknown family {raw['family']!r} (one of {', '.join(FAMILIES)})",
                        path=path, row=row, field="family")
    why = reserved_use(raw["source"], raw["command"])
    if why:
        raise DataError(why, path=path, row=row, field="source", instance_id=raw["output_id"])
    clean = {name: raw.get(name) for name in POOL_FIELDS}
    if not check_digest(clean):
        raise DataError("output_id does not match the command and output: the output was edited after collection",
                        path=path, row=row, field="tool_output", instance_id=raw["output_id"])
    return clean


def read_pool(paths: str | Path | Iterable[str | Path]) -> dict[str, dict[str, Any]]:
    """Pool rows by output_id from JSONL/Parquet files (or folders of them); bad rows are errors."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        path = Path(path)
        files = sorted([*path.glob("*.jsonl"), *path.glob("*.parquet")]) if path.is_dir() else [path]
        for file in files:
            if not file.exists():
                raise DataError("pool file does not exist", path=file)
            for index, raw in enumerate(_raw_rows(file), start=1):
                clean = check_pool_row(raw, path=file, row=index)
                rows.setdefault(clean["output_id"], clean)
    return rows


def _raw_rows(file: Path) -> Iterable[dict[str, Any]]:
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(file).to_pylist()
        return
    with file.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as error:
                    raise DataError(f"not valid JSON ({error.msg})", path=file, row=index) from None


def write_pool(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write pool rows as zstd Parquet (the repository's copy), atomically."""
    import pyarrow.parquet as pq

    from squeez_ray.io_utils import atomic_path

    table = pa.Table.from_pylist([{name: r.get(name) for name in POOL_FIELDS} for r in rows], schema=POOL_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=19)
    return table.num_rows


def as_observation(row: Mapping[str, Any]) -> dict[str, Any]:
    """A pool row in the raw-observation contract, as ``jobs/label.py`` reads observations."""
    return {"instance_id": row["output_id"], "repo": row["source"], "base_commit": None,
            "tool_type": row["family"], "command": row["command"], "exit_code": row.get("exit_code"),
            "duration_s": None, "tool_output": row["tool_output"], "truncated": False, "error": None}
