"""Workflow configs: dataclasses filled from YAML plus dotted ``key=value`` overrides.

One validation pass reports every problem at once (unknown keys, wrong types, failed checks), each
naming the key, the value and what was allowed. Each workflow declares its own dataclass next to
its code; this module only knows how to fill and check one.

Rules every config gets here, so no job has to repeat them: numbers are finite (``.inf`` and
``.nan`` are refused) and not negative unless the field's own default is (a ``-1`` sentinel); a
YAML file or override nested too deeply to read is one error, not a RecursionError; a field of the
wrong type is reported without running that section's ``validate()`` (which would compare a
string with a number and crash).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    def __init__(self, problems: list[str], source: str = ""):
        self.problems = problems
        head = f"invalid config{f' {source}' if source else ''} ({len(problems)} problem(s)):"
        super().__init__("\n  - ".join([head, *problems]))


NEGATIVE = "must not be negative"
TOO_DEEP = "nested too deeply to read (lists or mappings inside each other over ~1000 levels)"


def parse_override(text: str) -> tuple[str, Any]:
    """``a.b=3`` -> ("a.b", 3); values are read as YAML so lists, bools and null work."""
    import yaml

    if "=" not in text:
        raise ConfigError([f"override {text!r} is not key=value"])
    key, raw = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as error:
        raise ConfigError([f"override {key.strip()}: {raw[:80]!r} is not valid YAML: {error}"]) from None
    except RecursionError:
        raise ConfigError([f"override {key.strip()}: {TOO_DEEP}"]) from None


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None) -> T:
    """Build ``cls`` from a YAML file (optional) with overrides applied, or raise ConfigError."""
    import yaml

    data: dict[str, Any] = {}
    source = ""
    if path is not None:
        source = str(path)
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ConfigError([f"config file {path} does not exist"], source) from None
        except yaml.YAMLError as error:
            raise ConfigError([f"{path} is not valid YAML: {error}"], source) from None
        except RecursionError:
            raise ConfigError([f"{path}: {TOO_DEEP}"], source) from None
        if not isinstance(data, dict):
            raise ConfigError([f"{path} must hold a mapping at the top level, not {type(data).__name__}"], source)
    problems: list[str] = []
    items = overrides.items() if isinstance(overrides, dict) else (parse_override(o) for o in overrides or [])
    for key, value in items:
        set_dotted(data, key, value)
    try:
        result = _build(cls, data, "", problems)
        json.dumps(data, default=str)  # manifests write the config: it must be writable (not too deep)
    except RecursionError:
        raise ConfigError([TOO_DEEP], source) from None
    if problems:
        raise ConfigError(problems, source)
    return result


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def _build(cls: type, data: Any, prefix: str, problems: list[str]) -> Any:
    if not isinstance(data, dict):
        problems.append(f"{prefix or '<root>'}: expected a mapping, got {data!r}")
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            problems.append(f"{prefix}{key}: unknown key (allowed: {', '.join(sorted(fields))})")
    kwargs: dict[str, Any] = {}
    before = len(problems)
    for name, field in fields.items():
        if name not in data:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                problems.append(f"{prefix}{name}: required, no value given")
            continue
        negative_ok = isinstance(field.default, (int, float)) and field.default < 0
        kwargs[name] = _coerce(hints[name], data[name], f"{prefix}{name}", problems, negative_ok)
    try:
        obj = cls(**kwargs)
    except TypeError as error:  # a missing required field, already reported above
        problems.append(f"{prefix or '<root>'}: {error}")
        return None
    check = getattr(obj, "validate", None)
    if callable(check):
        try:
            found = check() or []
        except (TypeError, ValueError, AttributeError):
            if len(problems) == before:  # not explained by a bad value above: a bug, show it
                raise
            found = []  # validate() met a value of the wrong type, already reported
        # One line per bad value: the section's own message (it knows the allowed range) wins over
        # the generic "must not be negative" for the same key.
        own = {f"{prefix}{p.split(':', 1)[0]}" for p in found}
        problems[before:] = [p for p in problems[before:] if not (p.split(":", 1)[0] in own and NEGATIVE in p)]
        problems.extend(f"{prefix}{problem}" for problem in found)
    return obj


def _coerce(hint: Any, value: Any, key: str, problems: list[str], negative_ok: bool = False) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, key + ".", problems)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(inner[0], value, key, problems, negative_ok)
        return value
    if origin is typing.Literal:
        if value not in args:
            problems.append(f"{key}: {value!r} is not allowed (choose one of {', '.join(map(repr, args))})")
        return value
    if hint is Any:
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            problems.append(f"{key}: expected a list, got {value!r}")
            return value
        return [_coerce(args[0], v, f"{key}[{i}]", problems) for i, v in enumerate(value)] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            problems.append(f"{key}: expected a mapping, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            problems.append(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{key}: expected a number, got {value!r}")
            return value
        if not math.isfinite(value):
            problems.append(f"{key}: expected a finite number, got {value!r}")
        elif value < 0 and not negative_ok:
            problems.append(f"{key}: {value!r} {NEGATIVE}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{key}: expected an integer, got {value!r}")
        elif value < 0 and not negative_ok:
            problems.append(f"{key}: {value!r} {NEGATIVE}")
        return value
    if hint is str:
        if not isinstance(value, str):
            problems.append(f"{key}: expected a string, got {value!r}")
        return value
    return value


def output_dir_problem(key: str, path: str | Path) -> str | None:
    """Why ``path`` cannot be an output folder (a file, or not writable), or None: checked before
    a job starts work, so it fails in a line rather than a traceback from deep inside."""
    import os

    target = Path(path).expanduser()
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        what = "is a file" if existing == target else f"lies under {existing}, which is a file"
        return f"{key}: {path} {what}; give a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{key}: {path} is not writable ({existing} is read-only for this user)"
    return None


def to_dict(config: Any) -> dict[str, Any]:
    """The resolved config, JSON-safe, for manifests."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))
