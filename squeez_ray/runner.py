"""One runner for every ``jobs/*.py``: the skeleton each job used to copy.

A job file is its entry point and nothing else: it names its config dataclass and a ``work``
function, and :func:`run_job` does the rest, the same way for every job:

- ``--config YAML`` plus dotted ``key=value`` overrides (``squeez_ray.config.load_config``), with
  every config field and its help listed by ``--help``;
- logging set up once. Ray is joined by the one rule of ``ray_init.init_ray``, called by the work
  itself at the point it needs Ray: after its inputs are checked (bad input fails in seconds) and
  not at all when a resumed run finds nothing left to do;
- one error type, ``squeez_ray.errors.JobError`` (configs: ``ConfigError``; data: ``DataError``): the message is
  printed as one line ``JOB: message`` on stderr, never a traceback, and the job exits 2;
- an ``OSError`` reaching the top (an output path that is a file or read-only, a missing input, a
  full disk) is one line ``JOB: path: reason``, exit 2, like a JobError;
- exit codes: 0 done, 1 done with failures the manifest lists, 2 bad input, 130 interrupted;
- the summary printed last on stdout (indented JSON: scripts read it), and one line on stderr
  saying how the job ended, how long it took and where its manifest is.

Jobs whose settings are flags (``reprune``, ``evaluate``, ``merge``) take a YAML config and
overrides too: :func:`parse_flags` reads YAML keys and ``key=value`` words named after the flags
(flags given on the command line win).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import logging
import sys
import textwrap
import time
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from squeez_ray.errors import JobError

__all__ = ["EXIT_FAILURES", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "JobError", "Outcome", "add_config_arguments",
           "add_worker_arguments", "config_fields_help", "field_help", "job_parser", "parse_flags", "positive_int",
           "run_job"]

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclasses.dataclass
class Outcome:
    """What a job's ``work`` returns."""

    summary: Any = None  # printed last on stdout as indented JSON (None: nothing)
    notes: Sequence[str] = ()  # lines printed after the summary (where things were written)
    manifest: str | Path | None = None  # named in the final line on stderr
    exit_code: int = EXIT_OK  # EXIT_FAILURES when the job finished but some items failed


def job_parser(doc: str | None, config_cls: type | None = None, *, config_help: str = "YAML config",
               config_required: bool = False, config_default: str | None = None,
               overrides_example: str = "seed=1") -> argparse.ArgumentParser:
    """The parser every config-driven job shares: ``--config`` and positional dotted overrides."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=config_fields_help(config_cls) if config_cls else None)
    parser.add_argument("--config", required=config_required, default=config_default, help=config_help)
    parser.add_argument("overrides", nargs="*", help=f"dotted key=value overrides of the config, e.g. {overrides_example}")
    return parser


def run_job(name: str, work: Callable[..., Outcome], argv: Sequence[str] | None = None, *,
            parser: argparse.ArgumentParser, config_cls: type | None = None,
            config_overrides: Callable[[argparse.Namespace], list[str]] | None = None,
            errors: tuple[type[BaseException], ...] = (), logs: bool = True) -> int:
    """Parse, load the config, run ``work(config, args)`` (or ``work(args)`` without a config
    class) and report; returns the exit code. ``errors``: more exception types that mean bad input."""
    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.schema import DataError

    flags_config = config_cls is None and "--config" in parser._option_string_actions
    args = parse_flags(parser, argv) if flags_config else parser.parse_args(argv)
    if logs:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    try:
        if config_cls is not None:
            extra = config_overrides(args) if config_overrides else []
            config = load_config(config_cls, args.config, [*(args.overrides or []), *extra])
            outcome = work(config, args)
        else:
            outcome = work(args)
    except (ConfigError, DataError, JobError, *errors) as error:
        print(f"{name}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # a path that is a file, read-only, missing, a full disk: the person's to fix
        print(f"{name}: {_os_error(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{name}: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    _report(name, outcome, time.perf_counter() - started)
    return outcome.exit_code


def _os_error(error: OSError) -> str:
    if error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _report(name: str, outcome: Outcome, seconds: float) -> None:
    import json

    if outcome.summary is not None:
        print(json.dumps(outcome.summary, indent=2, default=str))
    for line in outcome.notes:
        print(line)
    sys.stdout.flush()
    state = "done" if outcome.exit_code == EXIT_OK else f"finished with failures (exit {outcome.exit_code})"
    where = f"; manifest: {outcome.manifest}" if outcome.manifest else ""
    print(f"{name}: {state} in {seconds:.1f} s{where}", file=sys.stderr, flush=True)


# -- flag-driven jobs: a YAML config and key=value overrides named after the flags -----------------


def add_config_arguments(parser: argparse.ArgumentParser, extra_keys: Sequence[str] = (),
                         required: Sequence[str] = ()) -> None:
    """``--config`` and the ``key=value`` words of a job whose settings are flags. ``required``
    names flags that the command line or the config must give (argparse alone cannot know)."""
    keys = ", ".join(sorted({a.dest for a in parser._actions if a.dest not in ("help", "config")} | set(extra_keys)))
    parser.add_argument("--config", help="YAML whose keys are the flags' names with underscores; flags given "
                                         "on the command line win")
    parser.epilog = ((parser.epilog + "\n\n") if parser.epilog else "") + (
        "config keys (YAML, or key=value words after the flags):\n"
        + textwrap.fill(keys, 100, initial_indent="  ", subsequent_indent="  "))
    parser.set_defaults(_extra_config_keys=tuple(extra_keys), _required_config_keys=tuple(required))


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (a config value gets the same check)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_worker_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                         batch: tuple[str, int, str]) -> None:
    """The Ray actor-pool flags of the bulk commands (``squeez eval --ray``, ``jobs/reprune.py``), declared
    once. ``batch``: (flag, default, help) of the command's own batch size (what one actor call gets)."""
    flag, default, help_text = batch
    parser.add_argument("--workers", type=positive_int, default=1,
                        help="Ray actors, each holding one pruner (squeez eval: per system); default 1")
    parser.add_argument(flag, type=positive_int, default=default, help=f"{help_text} (default {default})")
    parser.add_argument("--cpus-per-worker", type=float, default=0.5, help="CPUs reserved per actor (default 0.5)")
    parser.add_argument("--gpus-per-worker", type=float, default=0.0,
                        help="GPUs per actor, for model backends (vllm, transformers, encoder) on GPU nodes "
                             "(default 0)")


def parse_flags(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags > ``key=value`` words > ``--config`` YAML > defaults. Keys no flag carries
    (``extra_keys`` of :func:`add_config_arguments`, e.g. ``engine_kwargs``) land on the namespace."""
    from squeez_ray.config import ConfigError, parse_override, set_dotted

    argv = list(sys.argv[1:] if argv is None else argv)
    words, rest = _split_overrides(parser, argv)
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--config")
    config_path = peek.parse_known_args(rest)[0].config
    values = _read_yaml(config_path, parser) if config_path else {}
    try:
        for word in words:
            key, value = parse_override(word)
            set_dotted(values, key, value)
    except ConfigError as error:
        parser.error("; ".join(error.problems))
    dests = {a.dest for a in parser._actions}
    allowed = (dests - {"help", "config"}) | set(parser.get_default("_extra_config_keys") or ())
    unknown = sorted(set(values) - allowed)
    if unknown:
        where = f"--config {config_path}: " if config_path else ""
        parser.error(f"{where}unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    declared = {a.dest: a.default for a in parser._actions}  # before the config's values replace them
    parser.set_defaults(**{k: v for k, v in values.items() if k in dests})
    args = parser.parse_args(rest)
    for key in set(values) - dests:
        setattr(args, key, values[key])
    missing = [key for key in parser.get_default("_required_config_keys") or () if getattr(args, key, None) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join('--' + m for m in missing)}")
    _check_numbers(parser, args, declared)
    return args


def _check_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace, declared: dict[str, Any]) -> None:
    """The config layer's number rules for flags (``squeez_ray.config``): of the right type (a YAML
    value skips argparse's conversion), finite, and not negative unless the default is."""
    import math

    from squeez_ray.config import NEGATIVE

    for action in parser._actions:
        if action.type not in (int, float, positive_int) or action.nargs not in (None, "?"):
            continue
        value = getattr(args, action.dest, None)
        flag = action.option_strings[-1] if action.option_strings else action.dest
        if value is None:
            continue
        whole = action.type in (int, positive_int)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and isinstance(value, float)):
            kind = "an integer" if whole else "a number"
            parser.error(f"{flag}: expected {kind}, got {value!r}")
        if not math.isfinite(value):
            parser.error(f"{flag}: expected a finite number, got {value!r}")
        if action.type is positive_int and value < 1:
            parser.error(f"{flag}: must be at least 1, got {value!r}")
        default = declared.get(action.dest)
        default = default if isinstance(default, (int, float)) else 0
        if value < 0 <= default:
            parser.error(f"{flag}: {value!r} {NEGATIVE}")


def _split_overrides(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """Separate ``key=value`` words (a known key, not the value of a preceding option) from the rest."""
    keys = {a.dest for a in parser._actions} | set(parser.get_default("_extra_config_keys") or ())
    words, rest = [], []
    for i, token in enumerate(argv):
        previous = argv[i - 1] if i else ""
        takes_value = (previous.startswith("-") and "=" not in previous
                       and getattr(parser._option_string_actions.get(previous), "nargs", 0) != 0)
        if "=" in token and not token.startswith("-") and not takes_value and token.split("=")[0].split(".")[0] in keys:
            words.append(token)
        else:
            rest.append(token)
    return words, rest


def _read_yaml(path: str, parser: argparse.ArgumentParser) -> dict[str, Any]:
    import yaml

    from squeez_ray.config import TOO_DEEP

    try:
        values = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        parser.error(f"--config {path}: {error}")
    except RecursionError:
        parser.error(f"--config {path}: {TOO_DEEP}")
    if not isinstance(values, dict):
        parser.error(f"--config {path}: must hold a mapping at the top level")
    return values


# -- help text of config fields ------------------------------------------------------------------


def field_help(cls: type) -> dict[str, str]:
    """Each field's help: ``field(metadata={"help": ...})``, else the comment on its line, else the
    comment lines right above it (the style the config classes are written in)."""
    comments = _source_comments(cls)
    return {f.name: f.metadata.get("help") or comments.get(f.name, "") for f in dataclasses.fields(cls)}


def config_fields_help(cls: type, prefix: str = "") -> str:
    """``--help`` text: every field of ``cls`` (nested sections as dotted keys) with type, default, help."""
    lines = [] if prefix else ["config keys (YAML, or key=value overrides):"]
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            lines.append(config_fields_help(hint, f"{prefix}{f.name}."))
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            "required" if f.default_factory is dataclasses.MISSING else f.default_factory())
        lines.append(f"  {prefix}{f.name} (default {default!r}): {helps[f.name]}".rstrip(": "))
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _source_comments(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = lines[node.lineno - 1]
            trailing = _comment(lines[node.end_lineno - 1]) or _comment(line)  # type: ignore[operator]
            above = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#"):
                above.insert(0, lines[row].strip().lstrip("#").strip())
                row -= 1
            found[node.target.id] = trailing or " ".join(above)
    return found


def _comment(line: str) -> str:
    """The ``# ...`` comment of a code line (a ``#`` inside a string is not one)."""
    import io
    import tokenize

    try:
        for token in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if token.type == tokenize.COMMENT:
                return token.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return ""
