"""``squeez report DIR...``: what the agent hooks would have saved on stored agent runs.

Replays every tool output in the runs under DIR (the six trajectory formats of
``squeez_ray/trajectories``, detected from content) through the hook's own decision
(``hooks.patterns.should_wrap``, with the config's ``hook_patterns``) and, for the outputs it
would wrap, through the same ``prune_output`` that ``squeez run`` calls, with the configured
backend (default: the shipped encoder). Prints one row per tool family:

- wrapped: outputs the hook would wrap; pruned: those long enough to be pruned (``min_lines``);
- tokens before / after: the output, and what the agent would have read instead (kept lines,
  markers and footer), estimated as characters / 4 (the agent's own tokenizer is unknown here);
- failure lines: lines with a failure shape (``failure_lines.is_failure_line``) in the output, and
  how many the answer kept. The formats do not all record exit codes, so the replay runs without
  one and ``squeez run``'s failure safety net (which applies on a non-zero exit) is not counted:
  the kept share is what the model alone keeps, a lower bound.

Only shell calls reach the hooks (Claude Code's Bash, Codex's shell, OpenHands' execute_bash /
terminal, mini-swe-agent's and SWE-agent's actions); other tools' outputs are counted apart. Reading
the formats needs only the standard library, so this works with the plain install. Full outputs go
to a temporary store, never the user's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.pipe import EXIT_BACKEND, EXIT_OK, EXIT_USAGE, note
from squeez_ray.config import ConfigError

# The tool names whose calls are shell commands, per format (what a PreToolUse hook on the shell sees).
SHELL_TOOLS = {"Bash", "shell", "local_shell", "exec_command", "bash", "execute_bash", "terminal", None}
OTHER = "(other tools)"
LEFT_ALONE = "(shell, left alone)"
TOKENS = "characters / 4"
# A marker line of markers.marker(): "[squeez: N lines omitted (A-B); ...]".
_MARKER = re.compile(r"^\[squeez: \d+ lines? omitted \((?P<start>\d+)-(?P<end>\d+)\);", re.MULTILINE)


@dataclasses.dataclass
class Row:
    outputs: int = 0
    pruned: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    failure_lines: int = 0
    failure_kept: int = 0

    def add(self, other: Row) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclasses.dataclass
class Replay:
    rows: dict[str, Row] = dataclasses.field(default_factory=dict)
    files: dict[str, int] = dataclasses.field(default_factory=dict)  # format -> files read
    unreadable: list[str] = dataclasses.field(default_factory=list)
    backend: str | None = None

    def row(self, family: str) -> Row:
        return self.rows.setdefault(family, Row())


def shell_command(tool: str | None, args: str | None) -> str | None:
    """The shell command of a call, or None when the call is not a shell command."""
    if tool not in SHELL_TOOLS or not args:
        return None
    if args.lstrip().startswith("{"):  # Claude Code's Bash and OpenHands V1's terminal keep JSON input
        try:
            value = json.loads(args)
        except json.JSONDecodeError:
            return args
        command = value.get("command") if isinstance(value, dict) else None
        if isinstance(command, list):
            command = command[-1] if command[:2] in (["bash", "-lc"], ["bash", "-c"]) else " ".join(command)
        return command if isinstance(command, str) else None
    return args


def description(args: str | None) -> str | None:
    """The agent's own one-line description of a call, where the format records one (the hook's query)."""
    try:
        value = json.loads(args or "")
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict):
        text = value.get("description") or value.get("summary")
        return text if isinstance(text, str) else None
    return None


def iter_runs(roots: list[Path], replay: Replay) -> Iterator[tuple[str, list[Any]]]:
    """(format, observations) of every stored run under ``roots``; unreadable ones are noted and skipped."""
    from squeez_ray.trajectories.base import TrajectoryParseError
    from squeez_ray.trajectories.detect import ADAPTERS, detect_format, discover_units

    for root in roots:
        units = [root] if root.is_file() else [root / unit for unit in discover_units(root)]
        for path in units:
            name = detect_format(path)
            if name is None:
                continue
            try:
                observations = ADAPTERS[name].iter_observations(ADAPTERS[name].load(path))
            except (TrajectoryParseError, OSError, ValueError) as error:
                replay.unreadable.append(f"{path}: {error}")
                continue
            replay.files[name] = replay.files.get(name, 0) + 1
            yield name, observations


def replay_runs(roots: list[Path], settings: Any, limit: int | None = None) -> Replay:
    from squeez_ray.cli.failure_lines import is_failure_line
    from squeez_ray.cli.hooks.claude_code import build_query
    from squeez_ray.cli.hooks.patterns import should_wrap, split_cd_prefix
    from squeez_ray.cli.run import prune_output

    replay = Replay(backend=settings.backend)
    patterns = getattr(settings, "hook_patterns", None)
    seen = 0
    with tempfile.TemporaryDirectory(prefix="squeez-report-") as store:
        settings.store_dir = store  # markers name a real id, as they would; the user's store is untouched
        for _, observations in iter_runs(roots, replay):
            for obs in observations:
                if limit is not None and seen >= limit:
                    return replay
                seen += 1
                text = obs.text or ""
                before = _tokens(text)
                command = shell_command(obs.tool, obs.args)
                command = split_cd_prefix(command)[1] if command else command  # the hook wraps what follows a cd
                family = should_wrap(command, patterns) if command else None
                if family is None:
                    replay.row(OTHER if command is None else LEFT_ALONE).add(Row(1, 0, before, before))
                    continue
                query = build_query(description(obs.args) or obs.thought, command, None)
                result = prune_output(query, text, settings)
                failures = [i for i, line in enumerate(text.splitlines(), 1) if is_failure_line(line)]
                kept = _kept_line_numbers(result.text, result.pruned, len(text.splitlines()))
                replay.row(family).add(Row(1, int(result.pruned), before, _tokens(result.text), len(failures),
                                           sum(1 for i in failures if i in kept)))
    return replay


def _kept_line_numbers(answer: str, pruned: bool, total: int) -> set[int]:
    """Source line numbers present in an answer: everything when unpruned, else what the markers skip."""
    if not pruned:
        return set(range(1, total + 1))
    omitted: set[int] = set()
    for match in _MARKER.finditer(answer):
        omitted.update(range(int(match.group("start")), int(match.group("end")) + 1))
    return set(range(1, total + 1)) - omitted


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def render_table(replay: Replay) -> str:
    order = sorted((f for f in replay.rows if not f.startswith("(")), key=lambda f: -replay.rows[f].tokens_before)
    order += [f for f in (LEFT_ALONE, OTHER) if f in replay.rows]
    lines = ["| family | outputs | pruned | tokens before | tokens after | saved | failure lines kept |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    wrapped, total = Row(), Row()
    for family in order:
        row = replay.rows[family]
        total.add(row)
        if not family.startswith("("):
            wrapped.add(row)
        lines.append(_line(family, row))
    lines.append(_line("**all wrapped**", wrapped))
    lines.append(_line("**all tool outputs**", total))
    files = ", ".join(f"{name} {count}" for name, count in sorted(replay.files.items()))
    lines.append("")
    lines.append(f"Runs read: {files or 'none'}. Backend: {replay.backend}. Tokens: {TOKENS} (estimate). "
                 "Failure lines: kept / present, without the exit-code safety net.")
    return "\n".join(lines)


def _line(name: str, row: Row) -> str:
    saved = f"{100 * (1 - row.tokens_after / row.tokens_before):.0f}%" if row.tokens_before else "-"
    failures = f"{row.failure_kept} / {row.failure_lines}" if row.failure_lines else "-"
    return (f"| {name} | {row.outputs} | {row.pruned} | {row.tokens_before:,} | {row.tokens_after:,} | {saved} | "
            f"{failures} |")


def build_parser() -> argparse.ArgumentParser:
    from squeez_ray.infer.registry import BACKENDS

    parser = argparse.ArgumentParser(prog="squeez report", description="Replay stored agent runs through the "
                                     "hook's patterns and the pruner; print what it would have saved, per family.",
                                     epilog="example: squeez report ../shared/trajectories")
    parser.add_argument("paths", nargs="+", help="files or folders of stored runs (any of the six formats)")
    parser.add_argument("--backend", choices=list(BACKENDS), help="pruner (default: as configured, else the "
                        "shipped encoder)")
    parser.add_argument("--model", help="checkpoint directory for the backend")
    parser.add_argument("--config", help="config file (default: $SQUEEZ_CONFIG or ~/.config/squeez/config.yaml)")
    parser.add_argument("--limit", type=int, help="replay at most this many tool outputs (a quick look)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    return parser


def missing_paths(paths: list[str]) -> str | None:
    """The one-line error for paths that do not exist, or None."""
    missing = [p for p in paths if not Path(p).exists()]
    return f"no such file or folder: {', '.join(missing)}" if missing else None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    roots = [Path(p) for p in args.paths]
    missing = missing_paths(args.paths)
    if missing:
        note(f"report: {missing}")
        return EXIT_USAGE
    try:
        settings = settings_mod.resolve({"backend": args.backend, "model": args.model, "markers": True},
                                        config_path=args.config)
    except ConfigError as error:
        note(f"report: {error}")
        return EXIT_USAGE
    problem = settings_mod.missing_model_message(settings)
    if problem is not None:
        note(f"report: {problem}")
        return EXIT_USAGE
    settings.store_outputs, settings.lossy = True, False
    replay = replay_runs(roots, settings, args.limit)
    for line in replay.unreadable:
        note(f"report: skipped {line}")
    if not replay.files:
        note(f"report: no stored agent runs found under {', '.join(args.paths)}")
        return EXIT_BACKEND
    if args.json:
        print(json.dumps({"backend": replay.backend, "tokens": TOKENS, "files": replay.files,
                          "rows": {k: dataclasses.asdict(v) for k, v in replay.rows.items()}}, indent=2))
    else:
        print(render_table(replay))
    sys.stdout.flush()
    return EXIT_OK
