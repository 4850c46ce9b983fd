"""``squeez run "QUERY" -- CMD [ARGS...]``: run a command, prune what it printed, exit with its exit code.

What the agent gets (the contract the Claude Code / Codex hooks and the MCP ``run`` tool rely on):

- The command's stdout and stderr through **one pipe**, so they interleave exactly as they would
  in the agent's own tool; stdin is inherited (the wrapper is transparent: a command reading stdin
  reads the same thing), except from the library (``run_command``), where it is /dev/null.
- The kept lines verbatim, each dropped stretch replaced in place by a marker naming its range and
  the command that prints it back (markers.py), then one footer line. The full output is kept in
  the store first; if it cannot be kept, nothing is cut (unless ``lossy``).
- The failure safety net (failure_lines.py): when the command exits non-zero, its summary and
  failure-shaped lines are kept whatever the model chose.
- The exit code of the command (128+N when a signal N ended it). squeez's own trouble never
  changes it: below ``min_lines``, over ``max_input_mb`` (streamed through), binary output, a
  broken config, a backend error or timeout, the output passes through unpruned with a note on
  stderr (fail-open, as the pipe does). Only a command that cannot be started exits 127 / 126, as a
  shell would, and a malformed ``squeez run`` line exits 2.
- Signals (child.py): SIGTERM and SIGHUP are passed on to the command, which is killed if it still
  runs a second later, and what it printed is printed whole, unpruned; SIGINT is left to the command
  while it runs, as a shell does for its foreground job. Once the output is read, any of the three
  prints it whole, unpruned, and ends squeez with the command's exit code. Reading stops a second
  after the command exits even if a process it left in the background holds the pipe open.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli import signals
from squeez_ray.cli.args import add_pruning_flags
from squeez_ray.cli.child import Child, exit_status
from squeez_ray.cli.failure_lines import failure_line_numbers
from squeez_ray.cli.intake import model_text
from squeez_ray.cli.markers import render_marked, visible_line_count
from squeez_ray.cli.pipe import EXIT_USAGE, note, reserved_stdout
from squeez_ray.cli.pruning import call_backend, footer_notes, input_gate, is_fallback, keep_full_output
from squeez_ray.config import ConfigError
from squeez_ray.spans import normalize_spans, split_lines

EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126


class RunError(Exception):
    """The command could not be started (one-line message); ``exit_code`` is what a shell would return."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class OutputTooLarge(RunError):
    """``run_command``: the output was over ``max_input_mb`` (read and dropped in bounded memory)."""


@dataclass
class RunResult:
    data: bytes  # what the agent sees, byte-exact (lines that were not UTF-8 come back unchanged)
    exit_code: int | None  # the command's (128+N for signal N); None for prune_output
    store_id: str | None  # `squeez show ID [--lines A-B]`; None when the full output was not kept
    pruned: bool
    kept_lines: int
    total_lines: int
    note: str | None = None  # why it was not pruned, or store trouble; for stderr / a log
    failure_lines: int = 0  # lines the safety net added to what the model kept
    backend_abandoned: bool = False  # the backend timed out and still runs in a daemon thread
    fallback: bool = False  # the model kept nothing: the answer is a head-and-tail sample (pruning.FALLBACK)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def prune_output(query: str, data: bytes | str, settings: settings_mod.Settings | None = None, exit_code: int | None = None) -> RunResult:
    """Prune an output you already have (the MCP ``prune`` tool, and ``run_command``'s second half).

    Never raises for squeez's own trouble: a gate, a missing model, a backend error or a timeout
    gives the whole output back, unpruned, with ``note`` saying why.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", errors="surrogateescape")
    if settings is None:
        try:
            settings = settings_mod.resolve()
        except ConfigError as error:
            return _whole(data, exit_code, f"config error, output not pruned: {error}")
    gate = input_gate(data, settings)
    if gate is not None:
        return _whole(data, exit_code, None if gate.quiet or gate.kind == "empty" else gate.reason)
    problem = settings_mod.missing_model_message(settings)
    if problem is not None:
        return _whole(data, exit_code, problem.split("\n", 1)[0] + " (output not pruned)")
    store_id, store_note = keep_full_output(settings, data)
    if store_id is None and settings.store_outputs and not settings.lossy:
        return _whole(data, exit_code, f"the full output cannot be kept for `squeez show` ({store_note}): "
                                       "passed through unpruned (lossy: true prunes anyway)")
    text = model_text(data)  # what the model reads: long lines cut (intake.py)
    answer: list[Any] = []
    worker = threading.Thread(target=lambda: answer.append(call_backend(settings, query, text)), daemon=True)
    worker.start()
    worker.join(settings.timeout_s)
    if not answer:  # the backend is still busy: answer now, let the daemon thread finish or die with us
        result = _whole(data, exit_code, f"backend {settings.backend} timed out after {settings.timeout_s:g} s; "
                                         "passed the full output through")
        result.backend_abandoned = True
        return result
    pruned, failure, pruner, _ = answer[0]
    if pruner is not None:
        with contextlib.suppress(Exception):
            pruner.close()
    if failure is not None:
        return _whole(data, exit_code, failure + "; passed the full output through")
    exact_lines = split_lines(data.decode("utf-8", errors="surrogateescape"))
    forced = [n for n in failure_line_numbers(exact_lines, exit_code) if not _kept(n, pruned.spans)]
    spans = normalize_spans([*pruned.spans, *([n, n] for n in forced)], len(exact_lines))
    total = visible_line_count(exact_lines)  # the empty piece after a final newline is no line
    kept = sum(min(end, total) - start + 1 for start, end in spans if start <= total)
    body = render_marked(exact_lines, spans, store_id, line_numbers=settings.line_numbers)
    extra = f", +{len(forced)} failure line{'s' if len(forced) != 1 else ''}" if forced else ""
    extra += footer_notes(pruned)
    where = f"full output: squeez show {store_id}" if store_id else "full output not kept"
    footer = f"[squeez: kept {kept} of {total} lines ({settings.backend}{extra}); {where}]"
    out = (body + "\n" if body else "") + footer + "\n"
    return RunResult(out.encode("utf-8", errors="surrogateescape"), exit_code, store_id, True, kept, total,
                     store_note, len(forced), fallback=is_fallback(pruned))


def run_command(query: str, command: list[str] | str, cwd: str | None = None, settings: settings_mod.Settings | None = None,
                stdin: Any = subprocess.DEVNULL) -> RunResult:
    """Run ``command`` (argv, or a string for ``bash -c``), wait for it, and prune what it printed.

    Raises RunError when the command cannot be started; anything else ends in a RunResult.
    """
    limit = int((settings.max_input_mb if settings is not None else settings_mod.CommandSettings.max_input_mb)
                * (1 << 20))
    proc = start(command, cwd, stdin)
    data = proc.stdout.read(limit + 1)
    over = len(data) > limit
    if over:  # drain the rest unread (memory stays flat) so the command can finish
        data, size = b"", len(data)
        while piece := proc.stdout.read(1 << 20):
            size += len(piece)
    proc.stdout.close()
    code = exit_status(proc.wait())
    if over:
        raise OutputTooLarge(f"the command's output is {size} bytes, over max_input_mb="
                             f"{limit / (1 << 20):g}: not returned (exit code {code}); narrow the command "
                             f"or write its output to a file and read parts of it", code)
    return prune_output(query, data, settings, exit_code=code)


# -- the command line -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="squeez run", usage="squeez run [OPTIONS] QUERY -- CMD [ARGS...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a command, keep the lines of its output (stdout and stderr, merged) that answer QUERY, "
                    "and exit with the command's exit code.",
        epilog="examples:\n  squeez run \"which tests fail and why\" -- pytest -q\n"
               "  squeez run \"the first compiler error\" -- bash -c 'make 2>&1 | tail -n 500'\n\n"
               "Each cut stretch is marked in place: [squeez: N lines omitted (A-B); squeez show ID --lines A-B].\n"
               "When the command fails, its summary and error lines are kept whatever the model chose.")
    parser.add_argument("query", help="what the agent needs from this output")
    add_pruning_flags(parser)
    return parser


def run_main(argv: list[str]) -> int:
    if "--" not in argv and any(flag in argv for flag in ("-h", "--help")):
        build_parser().print_help()
        return 0
    if "--" not in argv:
        note("usage: squeez run [OPTIONS] QUERY -- CMD [ARGS...]  (the `--` before the command is required)")
        return EXIT_USAGE
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1:]
    if not command:
        note("usage: squeez run [OPTIONS] QUERY -- CMD [ARGS...]  (no command after `--`)")
        return EXIT_USAGE
    args = build_parser().parse_args(own)
    if not args.query.strip():
        note("squeez run: the query is empty; say what you need from the output")
        return EXIT_USAGE
    settings, config_note = _settings(args)
    max_mb = settings.max_input_mb if settings else settings_mod.CommandSettings.max_input_mb
    with reserved_stdout() as (out, _owned):
        child = Child(out, int(max_mb * (1 << 20)))
        with signals.watch(child.on_signal):  # before the start: no signal may find the command unwatched
            try:
                child.proc = start(command, None, None)
            except RunError as error:
                note(str(error))
                return error.exit_code
            child.collect()
            code = child.code
            if child.streamed:
                note(f"output is over max_input_mb={max_mb:g}: passed through unpruned")
                return code
            if child.stop_by is not None:  # asked to stop while the command ran: answer now, unpruned
                result = _whole(child.data, code, f"interrupted by {child.stop_by}: the command's full output "
                                                  "passed through unpruned")
            elif settings is None:
                result = _whole(child.data, code, config_note)
            else:
                result = prune_output(args.query, child.data, settings, exit_code=code)
            child.write(result.data)
        if result.note:
            note(result.note)
        if result.backend_abandoned:  # an engine stuck in C code cannot be joined: end the process now
            import multiprocessing

            for worker in multiprocessing.active_children():  # os._exit skips their clean-up (vLLM's engine core)
                with contextlib.suppress(Exception):
                    worker.terminate()
            sys.stderr.flush()
            os._exit(code)
    return code


def _settings(args: argparse.Namespace) -> tuple[Any, str | None]:
    given = vars(args)
    cli = {name: given[name] for name in settings_mod.FIELDS if name in given and name != "query"}
    cli["markers"] = True
    try:
        return settings_mod.resolve(cli, config_path=args.config), None
    except ConfigError as error:  # the command still runs: a broken config must not break every wrapped call
        return None, f"config error, output not pruned: {error}"


# -- the process ------------------------------------------------------------------------------------


def start(command: list[str] | str, cwd: str | None, stdin: Any) -> subprocess.Popen:
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    try:
        return subprocess.Popen(argv, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        missing = cwd if cwd and not os.path.isdir(cwd) else argv[0]
        raise RunError(f"{missing}: command not found", EXIT_NOT_FOUND) from None
    except PermissionError:
        raise RunError(f"{argv[0]}: permission denied", EXIT_NOT_EXECUTABLE) from None
    except OSError as error:
        raise RunError(f"cannot run {argv[0]}: {error.strerror or error}", EXIT_NOT_EXECUTABLE) from None


def _whole(data: bytes, exit_code: int | None, why: str | None) -> RunResult:
    n = visible_line_count(data.split(b"\n")) if data else 0
    return RunResult(data, exit_code, None, False, n, n, why)


def _kept(number: int, spans: list[list[int]]) -> bool:
    return any(start <= number <= end for start, end in spans)
