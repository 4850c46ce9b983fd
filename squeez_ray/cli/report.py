"""``squeez report DIR...``: what the agent hooks would have saved on stored agent runs.

Replays every tool output in the runs under DIR (the six trajectory formats of
``squeez_ray/trajectories``, detected from content) through the hook's own decision
(``hooks.patterns.should_wrap``, with the config's ``hook_patterns``) and, for the outputs it
would wrap, through the same ``prune_output`` that ``squeez run`` calls, with the configured
backend (default: the shipped encoder). Prints one row per tool family:

- wrapped: outputs the hook would wrap; pruned: those long enough to be pruned (``min_lines``);
- tokens before / after: the output, and what the agent would have read instead (kept lines,
  markers and footer), with a real tokenizer where one is on this machine (tokens.py), else
  characters / 4; the table says which;
- re-read: answers an agent would not act on, counted as read again in full (their tokens are added
  to "after" in "saved with re-reads"): the model kept nothing (a head-and-tail fallback included),
  or the output has failure-shaped lines and the answer keeps none of them, or a file read kept
  <= 2 lines; and every ``squeez show`` call a stored run made (a regret: the agent asked for what
  was cut), its output's tokens added the same way;
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
SHOW = "(squeez show: regret)"
READ_FAMILY, FEW_LINES = "read", 2  # a file read that kept <= 2 lines is read again
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
    reread: int = 0  # answers counted as read again in full (or squeez show calls)
    reread_tokens: int = 0  # what those second reads cost
    fallback: int = 0  # answers that are the head-and-tail fallback (the model kept nothing)

    def add(self, other: Row) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclasses.dataclass
class Replay:
    rows: dict[str, Row] = dataclasses.field(default_factory=dict)
    files: dict[str, int] = dataclasses.field(default_factory=dict)  # format -> files read
    unreadable: list[str] = dataclasses.field(default_factory=list)
    backend: str | None = None
    tokens: str = ""  # what the token counts were made with

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


def is_show_call(command: str) -> bool:
    """``squeez show ...`` (or its module form): the agent asking for lines a marker said were cut."""
    words = command.split()
    return words[:2] == ["squeez", "show"] or words[1:4] == ["-m", "squeez_ray.cli", "show"]


def reread(result: Any, family: str, failures: list[int], kept: set[int]) -> bool:
    """Would the agent read this output again in full? (the rules in the module docstring)"""
    if not result.pruned:
        return False
    model_kept = 0 if result.fallback else result.kept_lines - result.failure_lines
    if model_kept <= 0:
        return True
    if failures and not any(i in kept for i in failures):
        return True
    return family == READ_FAMILY and result.kept_lines <= FEW_LINES


def replay_runs(roots: list[Path], settings: settings_mod.Settings, limit: int | None = None, count: Any = None) -> Replay:
    from squeez_ray.cli.failure_lines import is_failure_line
    from squeez_ray.cli.hooks.claude_code import build_query
    from squeez_ray.cli.hooks.patterns import should_wrap, split_cd_prefix
    from squeez_ray.cli.run import prune_output

    from squeez_ray.cli.tokens import resolve

    count = count or resolve("chars")
    replay = Replay(backend=settings.backend, tokens=count.name)
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
                before = count.count(text)
                command = shell_command(obs.tool, obs.args)
                command = split_cd_prefix(command)[1] if command else command  # the hook wraps what follows a cd
                if command and is_show_call(command):
                    replay.row(SHOW).add(Row(1, 0, before, before, reread=1, reread_tokens=before))
                    continue
                family = should_wrap(command, patterns) if command else None
                if family is None:
                    replay.row(OTHER if command is None else LEFT_ALONE).add(Row(1, 0, before, before))
                    continue
                query = build_query(description(obs.args) or obs.thought, command, None)
                result = prune_output(query, text, settings)
                failures = [i for i, line in enumerate(text.splitlines(), 1) if is_failure_line(line)]
                kept = _kept_line_numbers(result.text, result.pruned, len(text.splitlines()))
                again = reread(result, family, failures, kept)
                replay.row(family).add(Row(1, int(result.pruned), before, count.count(result.text), len(failures),
                                           sum(1 for i in failures if i in kept), int(again), before if again else 0,
                                           int(result.fallback)))
    return replay


def _kept_line_numbers(answer: str, pruned: bool, total: int) -> set[int]:
    """Source line numbers present in an answer: everything when unpruned, else what the markers skip."""
    if not pruned:
        return set(range(1, total + 1))
    omitted: set[int] = set()
    for match in _MARKER.finditer(answer):
        omitted.update(range(int(match.group("start")), int(match.group("end")) + 1))
    return set(range(1, total + 1)) - omitted


def render_table(replay: Replay) -> str:
    order = sorted((f for f in replay.rows if not f.startswith("(")), key=lambda f: -replay.rows[f].tokens_before)
    order += [f for f in (SHOW, LEFT_ALONE, OTHER) if f in replay.rows]
    lines = ["| family | outputs | pruned | tokens before | tokens after | saved | re-read | saved with re-reads "
             "| failure lines kept |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    wrapped, total = Row(), Row()
    for family in order:
        row = replay.rows[family]
        total.add(row)
        if not family.startswith("("):
            wrapped.add(row)
        elif family == SHOW:  # a regret costs the wrapped outputs' savings; over all outputs it is already read
            wrapped.reread += row.reread
            wrapped.reread_tokens += row.reread_tokens
            total.reread_tokens -= row.reread_tokens
        lines.append(_line(family, row))
    lines.append(_line("**all wrapped**", wrapped))
    lines.append(_line("**all tool outputs**", total))
    files = ", ".join(f"{name} {count}" for name, count in sorted(replay.files.items()))
    shows = replay.rows[SHOW].outputs if SHOW in replay.rows else 0
    lines.append("")
    lines.append(f"Runs read: {files or 'none'}. Backend: {replay.backend}. Tokens: {replay.tokens}. "
                 f"Fallback (head and tail, the model kept nothing): {wrapped.fallback} of {wrapped.pruned} pruned. "
                 f"`squeez show` calls in the runs: {shows}. "
                 "Failure lines: kept / present, without the exit-code safety net.")
    return "\n".join(lines)


def _share_saved(before: int, after: int) -> str:
    return f"{100 * (1 - after / before):.0f}%" if before else "-"


def _line(name: str, row: Row) -> str:
    failures = f"{row.failure_kept} / {row.failure_lines}" if row.failure_lines else "-"
    return (f"| {name} | {row.outputs} | {row.pruned} | {row.tokens_before:,} | {row.tokens_after:,} | "
            f"{_share_saved(row.tokens_before, row.tokens_after)} | {row.reread} | "
            f"{_share_saved(row.tokens_before, row.tokens_after + row.reread_tokens)} | {failures} |")


def build_parser() -> argparse.ArgumentParser:
    from squeez_ray.cli.args import add_config_flag
    from squeez_ray.infer.registry import BACKENDS

    parser = argparse.ArgumentParser(prog="squeez report", description="Replay stored agent runs through the "
                                     "hook's patterns and the pruner; print what it would have saved, per family.",
                                     epilog="example: squeez report ../shared/trajectories")
    parser.add_argument("paths", nargs="+", help="files or folders of stored runs (any of the six formats)")
    parser.add_argument("--backend", choices=list(BACKENDS), help="pruner (default: as configured, else the "
                        "shipped encoder)")
    parser.add_argument("--model", help="checkpoint directory for the backend")
    add_config_flag(parser)
    parser.add_argument("--limit", type=int, help="replay at most this many tool outputs (a quick look)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument("--next-action", action="store_true", help="instead: the share of what the agent used "
                        "in its next 3 calls (paths, test names, identifiers, line numbers) that each pruner kept")
    parser.add_argument("--tokens", default="auto", help="count tokens with: auto (a tokenizer found on this "
                        "machine, else characters / 4), chars, a tiktoken encoding name, or a tokenizer.json path")
    return parser


def missing_paths(paths: list[str]) -> str | None:
    """The one-line error for paths that do not exist or cannot hold stored runs, or None."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        return f"no such file or folder: {', '.join(missing)}"
    for path in paths:
        resolved = Path(path).resolve()
        if not (resolved.is_file() or resolved.is_dir()):
            return f"{path} is not a regular file or folder (a device, FIFO or socket): give files or folders of runs"
        if resolved.parts[1:2] in (("proc",), ("sys",)):  # folders of live files, some endless (/proc/kcore)
            return f"{path} is in /{resolved.parts[1]}, the system's live view, not stored runs"
    return None


def main(argv: list[str]) -> int:
    from squeez_ray.cli.tokens import TokenizerError
    from squeez_ray.cli.tokens import resolve as resolve_tokens

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
    try:
        count = resolve_tokens(args.tokens)
    except TokenizerError as error:
        note(f"report: {error}")
        return EXIT_USAGE
    try:
        if args.next_action:
            return _next_action(roots, settings, args)
        replay = replay_runs(roots, settings, args.limit, count)
    except OSError as error:  # a folder that changes or vanishes while it is read
        note(f"report: cannot read the runs: {error}")
        return EXIT_BACKEND
    if not _found_runs(replay, args.paths):
        return EXIT_BACKEND
    if args.json:
        print(json.dumps({"backend": replay.backend, "tokens": replay.tokens, "files": replay.files,
                          "rows": {k: dataclasses.asdict(v) for k, v in replay.rows.items()}}, indent=2))
    else:
        print(render_table(replay))
    sys.stdout.flush()
    return EXIT_OK


def _found_runs(replay: Replay, paths: list[str]) -> bool:
    for line in replay.unreadable:
        note(f"report: skipped {line}")
    if not replay.files:
        note(f"report: no stored agent runs found under {', '.join(paths)}")
    return bool(replay.files)


def _next_action(roots: list[Path], settings: settings_mod.Settings, args: argparse.Namespace) -> int:
    from squeez_ray.cli import report_next

    from squeez_ray.cli.hooks.claude_code import build_query

    def query_of(obs: Any) -> str:  # the hook's query, as replay_runs builds it
        command = shell_command(obs.tool, obs.args) or " ".join(p for p in (obs.tool, obs.args) if p)
        return build_query(description(obs.args) or obs.thought, command, None)

    replay = Replay(backend=settings.backend)
    runs = [observations for _, observations in iter_runs(roots, replay)]
    if not _found_runs(replay, args.paths):
        return EXIT_BACKEND
    scores = report_next.measure(runs, settings, list(dict.fromkeys([settings.backend, "bm25"])), query_of,
                                 args.limit)
    if args.json:
        print(json.dumps({"files": replay.files, "rows": [dataclasses.asdict(s) | {"share": round(s.share, 4)}
                                                           for s in scores]}, indent=2))
    else:
        print(report_next.render(scores, replay.files))
    sys.stdout.flush()
    return EXIT_OK
