"""Reading and writing labelled examples and raw observations: JSONL, Parquet, Hugging Face datasets.

Readers return checked canonical rows (``contracts.check_example``); anything wrong is one
``DataError`` naming the file, the row and the field. Writers check rows the same way and write
atomically, so a failed export never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from squeez_ray.io_utils import atomic_path
from squeez_ray.schema.contracts import (LABELLED_FIELDS, LABELLED_SCHEMA, OBSERVATION_FIELDS, OBSERVATION_SCHEMA,
                                         DataError, check_example, check_observation, warn_ignored_columns)
from squeez_ray.schema.formats import FORMATS, detect_format, from_row, to_cases_row, to_squeez_row

# (file the row came from, 1-based row number in that file, the row as read)
RawRow = tuple[str, int, Any]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SAVED_DATASET_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def read_examples(path: str | Path, format: str | None = None, *, split: str | None = None,
                  for_evaluation: bool = False) -> list[dict[str, Any]]:
    """Canonical labelled rows from a JSONL or Parquet file, a folder of Parquet files, a
    ``datasets`` ``save_to_disk`` folder, or a Hub dataset id (``owner/name``, needs the Hub).

    ``format`` forces the row shape (``canonical``, ``cases``, ``squeez``, ``encoder``); by default it
    is told from the columns. ``split`` picks one split of a dataset that holds several. The first bad
    row stops the read; ``schema.importing.import_examples`` skips and counts bad rows instead.
    ``for_evaluation`` also refuses a blank query (no pruner can be scored on it) and an
    ``instance_id`` seen before (per-example rows and resume are keyed by it).
    """
    files = rows_by_file(path, format, split=split)
    examples = [from_row(raw, f.format, path=f.file, row=n, source=f.source) for f in files for n, raw in f.rows]
    if for_evaluation:
        _check_evaluable(examples, [(f.file, n) for f in files for n, _ in f.rows])
    return examples


class FileRows(NamedTuple):
    file: str
    format: str  # the row shape this file's rows are read as
    source: str | None  # the source label of rows that carry none (a cases file's stem)
    rows: list[tuple[int, Any]]  # (1-based row number in the file, the row as read)


def rows_by_file(path: str | Path, format: str | None = None, *, split: str | None = None) -> list[FileRows]:
    """The raw rows of ``path`` (what ``read_examples`` takes), per file, with the row shape each file is
    read as: ``format``, else told from its first row's columns. ``read_examples`` (first bad row stops
    the read) and ``importing.import_examples`` (bad rows skipped and counted) both read through it."""
    if format is not None and format not in FORMATS:
        raise DataError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}", path=path)
    by_file: dict[str, list[tuple[int, Any]]] = {}
    for file, n, raw in _read_raw(path, split):
        by_file.setdefault(file, []).append((n, raw))
    files = []
    for file, rows in by_file.items():
        first = rows[0][1]
        columns = set(first) if isinstance(first, Mapping) else set()
        fmt = format or detect_format(columns, file)
        if fmt == "canonical":
            warn_ignored_columns(columns, LABELLED_FIELDS, file)
        # A cases file's rows carry no source label: name them after the file (public_cases.jsonl -> public_cases).
        files.append(FileRows(file, fmt, Path(file).stem if fmt == "cases" else None, rows))
    return files


def _check_evaluable(examples: list[dict[str, Any]], where: list[tuple[str, int]]) -> None:
    first_seen: dict[str, tuple[str, int]] = {}
    for example, (file, n) in zip(examples, where):
        ident = example.get("instance_id")
        if not str(example.get("query") or "").strip():
            raise DataError("empty query: an example needs the question its lines answer", path=file, row=n,
                            field="query", instance_id=ident)
        if ident in first_seen:
            other_file, other_row = first_seen[ident]
            raise DataError(f"duplicate instance_id (first at {other_file} row {other_row}): ids must be unique",
                            path=file, row=n, field="instance_id", instance_id=ident)
        first_seen[ident] = (file, n)


def write_examples(rows: Iterable[Mapping[str, Any]], path: str | Path, format: str | None = None) -> int:
    """Check ``rows`` and write them; returns the count.

    The file type comes from the suffix (``.parquet`` or ``.jsonl``); ``format`` picks the row shape
    (``canonical`` by default, ``cases``, ``squeez``, ``encoder``), or ``hf`` to ``save_to_disk`` a folder.
    """
    fmt = format or "canonical"
    if fmt not in (*FORMATS, "hf"):
        raise DataError(f"unknown format {fmt!r}; choose one of {', '.join((*FORMATS, 'hf'))}", path=path)
    label = f"rows to write to {path}"
    checked = [check_example(row, path=label, row=i) for i, row in enumerate(rows, 1)]
    if fmt == "hf":
        _save_to_disk(checked, Path(path))
        return len(checked)
    from squeez_ray.schema.encoder_rows import to_encoder_row

    convert: Callable[[Mapping[str, Any]], dict[str, Any]] = {
        "canonical": dict, "cases": to_cases_row, "squeez": to_squeez_row, "encoder": to_encoder_row}[fmt]
    out = [convert(row) for row in checked]
    _write_rows(out, Path(path), LABELLED_SCHEMA if fmt == "canonical" else None)
    return len(out)


def read_observations(path: str | Path) -> list[dict[str, Any]]:
    """Canonical raw-observation rows from a JSONL or Parquet file (or a folder of Parquet files)."""
    raw_rows = _read_raw(path, None)
    seen: set[str] = set()
    out = []
    for file, n, raw in raw_rows:
        if file not in seen and isinstance(raw, Mapping):
            seen.add(file)
            warn_ignored_columns(set(raw), OBSERVATION_FIELDS, file)
        out.append(check_observation(raw, path=file, row=n))
    return out


def write_observations(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    label = f"rows to write to {path}"
    checked = [check_observation(row, path=label, row=i) for i, row in enumerate(rows, 1)]
    _write_rows(checked, Path(path), OBSERVATION_SCHEMA)
    return len(checked)


# ----- reading --------------------------------------------------------------------------------------

def _read_raw(path: str | Path, split: str | None) -> list[RawRow]:
    p = Path(path)
    if p.is_dir():
        if any((p / marker).exists() for marker in _SAVED_DATASET_MARKERS):
            rows = _hf_rows(str(p), split, from_disk=True)
        else:
            files = sorted(p.rglob("*.parquet"))
            if not files:
                raise DataError("is a folder holding neither a saved dataset (save_to_disk) nor .parquet files", path=p)
            rows = [row for f in files for row in _parquet_rows(f)]
    elif p.exists():
        suffix = p.suffix.lower()
        if suffix in (".jsonl", ".json", ".ndjson"):
            rows = _jsonl_rows(p)
        elif suffix == ".parquet":
            rows = _parquet_rows(p)
        else:
            raise DataError(f"unknown file type {suffix or '(no suffix)'!r}: use .jsonl or .parquet", path=p)
    elif _HUB_ID.match(str(path)):
        rows = _hf_rows(str(path), split, from_disk=False)
    else:
        raise DataError("does not exist (and is not a Hugging Face dataset id like owner/name)", path=p)
    if not rows:
        raise DataError("holds no rows", path=p)
    return rows


def _jsonl_rows(path: Path) -> list[RawRow]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"cannot read: {error.strerror or error}", path=path) from None
    lines = data.split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    rows: list[RawRow] = []
    for i, raw_line in enumerate(lines):
        if not raw_line.strip():
            continue
        # surrogateescape keeps undecodable bytes as lone surrogates so the row check can name the field
        text = raw_line.decode("utf-8", "surrogateescape")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as error:
            hint = "; the file looks truncated" if i == last and not data.endswith(b"\n") else ""
            raise DataError(f"is not valid JSON ({error.msg} at column {error.colno}){hint}",
                            path=path, row=i + 1) from None
        rows.append((str(path), i + 1, obj))
    return rows


def _parquet_rows(path: Path) -> list[RawRow]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"cannot read as Parquet (unreadable or truncated): {error}", path=path) from None
    try:
        rows = table.to_pylist()
    except UnicodeDecodeError:
        raise _bad_utf8_in_table(table, path) from None
    return [(str(path), i, row) for i, row in enumerate(rows, 1)]


def _bad_utf8_in_table(table: pa.Table, path: Path) -> DataError:
    for name in table.column_names:
        column = table.column(name)
        for i in range(len(column)):
            try:
                column[i].as_py()
            except UnicodeDecodeError:
                return DataError("holds bytes that are not valid UTF-8", path=path, row=i + 1, field=name)
    return DataError("holds bytes that are not valid UTF-8", path=path)


def _hf_rows(source: str, split: str | None, *, from_disk: bool) -> list[RawRow]:
    import datasets

    try:
        loaded = datasets.load_from_disk(source) if from_disk else datasets.load_dataset(source, split=split)
    except (OSError, ValueError, FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as error:
        raise DataError(f"cannot load as a Hugging Face dataset: {error}", path=source) from None
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in loaded:
            raise DataError(f"holds splits {', '.join(names)}; choose one (split={split!r} is not among them)",
                            path=source)
        loaded = loaded[split]
    label = f"{source}[{split}]" if split else source
    return [(label, i, row) for i, row in enumerate(loaded, 1)]


# ----- writing --------------------------------------------------------------------------------------

def _write_rows(rows: list[dict[str, Any]], path: Path, schema: pa.Schema | None) -> None:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows, schema=schema) if schema is not None else pa.Table.from_pylist(rows)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd")  # the canonical form: text compresses ~5x
    elif suffix in (".jsonl", ".json", ".ndjson"):
        with atomic_path(path) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        raise DataError(f"unknown file type {suffix or '(no suffix)'!r}: use .jsonl or .parquet "
                        "(or format='hf' for a save_to_disk folder)", path=path)


def _save_to_disk(rows: list[dict[str, Any]], path: Path) -> None:
    """``datasets`` save_to_disk into a temporary folder beside ``path``, then swap it in."""
    import datasets

    features = datasets.Features.from_arrow_schema(LABELLED_SCHEMA)
    dataset = datasets.Dataset.from_list(rows, features=features)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # a library call should not draw progress bars on the user's terminal
    try:
        dataset.save_to_disk(str(tmp))
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
