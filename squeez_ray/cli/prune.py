"""``some_command | squeez "what I need"``: prune one tool output on the command line.

Contract (what an agent's pipe can rely on):

- stdout carries only the answer: the kept source lines, verbatim (byte-exact, even for lines that
  are not valid UTF-8), then one footer line ``[squeez: kept K of N lines ...; full output: squeez
  show ID]``. Anything a backend or engine prints (vLLM logs to stdout) is sent to stderr instead.
- Fail-open: a backend error or a timeout passes the full output through unchanged, exit 0, with a
  note on stderr; ``--strict`` makes those exit 1 with nothing on stdout. ``--timeout`` bounds the
  whole call, engine start included.
- Nothing is pruned, and the bytes pass through untouched (exit 0), when the output has fewer than
  ``min_lines`` lines (default 20), is empty, is binary (holds a NUL byte), or is larger than
  ``max_input_mb`` (streamed, so memory stays flat).
- Configuration errors exit 2 with a message saying how to fix them, and still pass the input
  through (unless ``--strict``) so a pipe never loses output. There is deliberately no default
  backend: a command that silently answered with BM25 when the user believes a model is pruning
  would drop the lines they need without telling them. With nothing configured the message lists
  ``--backend vllm --model DIR``, ``--backend openai --server-url URL``, ``--backend server`` and
  ``--backend bm25``.
- The full output of every pruned call is kept in a local store (``store.py``) and ``squeez show
  ID`` prints it back byte-exact.

Exit codes: 0 answered (pruned or passed through), 1 backend failure under ``--strict``, 2 usage
or configuration error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.markers import render_marked
from squeez_ray.cli.pipe import EXIT_BACKEND, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from squeez_ray.cli.pipe import note as _note
from squeez_ray.cli.pipe import release as _release
from squeez_ray.cli.pipe import reserved_stdout as _reserved_stdout
from squeez_ray.cli.pruning import call_backend, input_gate, keep_full_output
from squeez_ray.config import ConfigError
from squeez_ray.infer.base import PruneResult, unpruned_result
from squeez_ray.infer.registry import add_backend_arguments
from squeez_ray.spans import render, split_lines

_CHUNK = 1 << 20


class UsageError(Exception):
    """A problem the user fixes on the command line or in the config (exit 2)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="squeez", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keep only the lines of a tool output that answer a query (verbatim).",
        epilog="examples:\n  pytest -q 2>&1 | squeez \"which test failed and why\"\n"
               "  squeez --input-file build.log --json \"the first compiler error\"\n"
               "  squeez show 3f2a9c1b7d4e    # the full output behind a pruned answer\n"
               "  squeez run \"which tests fail\" -- pytest -q   # run, prune, keep the exit code (squeez run -h)\n"
               "  squeez install claude-code  # the agent hook (also: codex; squeez install -h)\n\n"
               "--timeout bounds the whole call, engine start included (default 60 s); past it, or on any\n"
               "backend error, the full output is printed unchanged (exit 0; --strict: exit 1).\n"
               "Settings: flags > SQUEEZ_* environment > config file ($SQUEEZ_CONFIG or "
               "~/.config/squeez/config.yaml) > defaults.")
    parser.add_argument("query", nargs="?", help="what the agent needs from this output")
    parser.add_argument("--input-file", help="read the tool output from this file instead of stdin")
    parser.add_argument("--backend", help="pruner: " + ", ".join(settings_mod.BACKENDS))
    parser.add_argument("--config", help="config file (default: $SQUEEZ_CONFIG or ~/.config/squeez/config.yaml)")
    parser.add_argument("--line-numbers", action=argparse.BooleanOptionalAction, default=None,
                        help="prefix kept lines with their source line number")
    parser.add_argument("--markers", action=argparse.BooleanOptionalAction, default=None,
                        help="mark each cut stretch in place: '[squeez: N lines omitted (A-B); squeez show ID "
                             "--lines A-B]'")
    parser.add_argument("--json", action="store_true", help="print one JSON object (spans, text, counts, store_id)")
    parser.add_argument("--stats", action="store_true", help="print lines / tokens kept and latency to stderr")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="a backend error or timeout exits 1 instead of passing the output through")
    parser.add_argument("--tool-type", help="hint: the tool that produced the output (read_file, grep, pytest, ...)")
    parser.add_argument("--store", dest="store_outputs", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the full output for `squeez show ID` (default: on)")
    parser.add_argument("--store-dir", help="where full outputs are kept (default: $SQUEEZ_STORE or ~/.cache/squeez/store)")
    parser.add_argument("--lossy", action=argparse.BooleanOptionalAction, default=None,
                        help="prune even when the full output cannot be kept for `squeez show` (default: pass "
                             "it through unpruned)")
    add_backend_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    with _reserved_stdout() as (out, owned):
        run = _Run(args, out, release_early=owned)
        try:
            return run.run()
        except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
            return EXIT_OK
        except KeyboardInterrupt:  # Ctrl-C: the agent still gets its output (what was read)
            return run.answer_anyway("interrupted", EXIT_INTERRUPTED)
        except Exception as error:  # noqa: BLE001 - a bug of ours after the input was read: never leave the pipe empty
            return run.answer_anyway(f"internal error ({type(error).__name__}: {error})", EXIT_BACKEND)


@dataclass
class _Input:
    data: bytes  # the bytes read (a prefix only when ``rest`` is set)
    rest: IO[bytes] | None = None  # still unread: the input was over max_input_mb and is streamed


class _Run:
    """One invocation. Once the watchdog runs, ``_claim`` makes sure exactly one answer reaches
    stdout, even when it and the main thread finish at the same moment."""

    def __init__(self, args: argparse.Namespace, out: IO[bytes], release_early: bool = False):
        self.args = args
        self.out = out
        self.release_early = release_early  # ``out`` is ours to close once answered
        self.started = time.perf_counter()
        self._answered = threading.Lock()
        self.settings: Any = None
        self.input = _Input(b"")
        self.load_s = 0.0
        self.input_read = False
        self._mine = False  # the main thread holds the answer lock
        self.wrote = False  # something reached ``out`` already (then a late failure cannot restart the answer)
        self.stored: tuple[str | None, str | None] | None = None  # (store id, note) once the store was tried

    # -- flow -------------------------------------------------------------------------------------

    def run(self) -> int:
        config_error = None
        try:
            self.settings = settings_mod.resolve(self._cli_settings(), config_path=self.args.config)
        except ConfigError as error:
            config_error = str(error)
        max_mb = self.settings.max_input_mb if self.settings else settings_mod.CommandSettings.max_input_mb
        try:
            self.input = self._read_input(int(max_mb * (1 << 20)))
        except UsageError as error:
            _note(str(error))
            return EXIT_USAGE
        self.input_read = True
        if config_error is None and not (self.args.query or "").strip():
            config_error = "a query is required: some_command | squeez \"what you need from its output\""
        if config_error is None:
            config_error = settings_mod.missing_model_message(self.settings)
        if config_error is not None:
            return self._usage_error(config_error)

        gate = input_gate(self.input.data, self.settings, over_limit=self.input.rest is not None)
        if gate is None:
            return self._prune()
        if gate.kind == "empty":
            return self._answer_empty()
        # JSON cannot hold binary bytes exactly: store them so `squeez show` can.
        return self._pass_through(gate.reason, quiet=gate.quiet, keep=self.args.json and gate.kind == "binary")

    def _prune(self) -> int:
        s = self.settings
        if s.store_outputs:  # keep the full output first: if it cannot be kept, do not cut it
            stored_id, store_note = self._keep_full_output()
            if stored_id is None and not s.lossy:
                return self._pass_through(f"the full output cannot be kept for `squeez show` ({store_note}): "
                                          "passed through unpruned (--lossy or SQUEEZ_LOSSY=true prunes anyway)",
                                          quiet=False)
        text = self.input.data.decode("utf-8", errors="replace")  # what the model reads
        watchdog = threading.Timer(s.timeout_s, self._on_timeout)
        watchdog.daemon = True
        watchdog.start()
        pruner = None
        try:
            result, failure, pruner, self.load_s = call_backend(s, self.args.query, text)
            watchdog.cancel()
            if not self._claim():  # the watchdog is answering and will end the process
                threading.Event().wait()
            self._mine = True
            if failure is not None:
                return self._backend_failed(failure)
            return self._answer_pruned(result)
        finally:
            watchdog.cancel()
            # End-of-file for the reader now: an engine's shut-down (seconds for vLLM) is not its wait.
            # Not before an answer was written: an interrupt or a bug still owes the reader the input.
            if self.release_early and self.wrote:
                _release(self.out)
            else:
                with contextlib.suppress(OSError, ValueError):
                    self.out.flush()
            if pruner is not None:
                with contextlib.suppress(Exception):
                    pruner.close()

    # -- answers ----------------------------------------------------------------------------------

    def _answer_pruned(self, result: PruneResult) -> int:
        s = self.settings
        stored_id, store_note = self._keep_full_output()
        if self.args.json:
            self._write_json(result, stored_id)
        else:
            # Cut from the source's own bytes: lines that were not valid UTF-8 come back unchanged.
            exact_lines = split_lines(self.input.data.decode("utf-8", errors="surrogateescape"))
            if s.markers:  # recoverable markers: each names its range and the `squeez show` that prints it
                body = render_marked(exact_lines, result.spans, stored_id, line_numbers=s.line_numbers)
            else:
                body = render(exact_lines, result.spans, line_numbers=s.line_numbers)
            if result.kept_lines:  # (a single kept empty line still gets its newline)
                self._emit(body.encode("utf-8", errors="surrogateescape") + b"\n")
            self._emit(self._footer(result, stored_id, store_note).encode() + b"\n")
        self.out.flush()
        if store_note:
            _note(store_note)
        self._stats(result)
        return EXIT_OK

    def _footer(self, result: PruneResult, stored_id: str | None, store_note: str | None) -> str:
        kept = (f"no lines matched the query; 0 of {result.total_lines} lines kept" if not result.kept_lines else
                f"kept {result.kept_lines} of {result.total_lines} lines")
        if stored_id:
            where = f"full output: squeez show {stored_id}"
        else:
            where = "full output not kept (" + (store_note or "store disabled") + ")"
        return f"[squeez: {kept} ({self.settings.backend}); {where}]"

    def _keep_full_output(self) -> tuple[str | None, str | None]:
        """(store id, note): the id is None when the output could not be kept; tried once per run."""
        s = self.settings
        if not s.store_outputs:
            return None, None
        if self.stored is None:
            self.stored = keep_full_output(s, self.input.data)
        return self.stored

    def _pass_through(self, reason: str, *, quiet: bool, keep: bool = False) -> int:
        """The whole input, unchanged, exit 0; ``keep`` stores it when JSON cannot hold it exactly."""
        self._write_whole_input(reason, keep=keep)
        if not quiet or self.args.stats:
            _note(reason)
        return EXIT_OK

    def _write_whole_input(self, reason: str, *, keep: bool = False) -> None:
        """The input byte for byte (streaming what is still unread), or as an unpruned JSON answer."""
        if self.args.json:
            stored_id = self._keep_full_output()[0] if keep else None
            backend = self.settings.backend if self.settings else None
            self._write_json(unpruned_result(self._read_rest_text(), reason, model=backend), stored_id)
        else:
            self._emit(self.input.data)
            if self.input.rest is not None:
                shutil.copyfileobj(self.input.rest, self.out, _CHUNK)
        self.out.flush()

    def _backend_failed(self, reason: str) -> int:
        if self.settings.strict:
            _note(reason + " (--strict: no output)")
            return EXIT_BACKEND
        return self._pass_through(reason + "; passed the full output through", quiet=False)

    def _usage_error(self, message: str) -> int:
        strict = self.settings.strict if self.settings else bool(self.args.strict)
        if strict or (self.input.rest is None and not self.input.data):
            _note(message)
        else:
            self._write_whole_input(message.split("\n", 1)[0])
            _note(message + "\n(the full output was passed through unpruned)")
        return EXIT_USAGE

    def _answer_empty(self) -> int:
        if self.args.json:
            empty = PruneResult(spans=[], kept_lines=0, total_lines=0, text="", pruned=False, reason="empty input",
                                model=self.settings.backend)
            self._write_json(empty, None)
        _note("empty input: nothing to prune (did the command before the pipe write to stderr?)")
        return EXIT_OK

    def answer_anyway(self, why: str, code: int) -> int:
        """After an interrupt or a bug: the full input (if read and nothing was written yet), and ``code``."""
        strict = bool(self.settings.strict) if self.settings else bool(self.args.strict)
        if self.input_read and not self.wrote and not strict:
            if not self._mine and not self._claim():  # the watchdog is answering and will end the process
                threading.Event().wait()
            self._mine = True
            with contextlib.suppress(OSError, ValueError):
                self._write_whole_input(why)
                _note(f"{why}; passed the full output through unpruned")
                return code
        _note(why)
        return code

    def _on_timeout(self) -> None:
        """Watchdog thread: answer with the full output and end the process, whatever the backend is doing.

        The backend runs in the main thread (engines install signal handlers and want it); a
        blocked C call cannot be interrupted, so the process exits with ``os._exit`` once the
        answer is flushed.
        """
        if not self._claim():  # the main thread is already answering
            return
        reason = f"backend {self.settings.backend} timed out after {self.settings.timeout_s:g} s"
        code = self._backend_failed(reason)
        with contextlib.suppress(Exception):
            self.out.flush()
            sys.stderr.flush()
        # os._exit skips multiprocessing's clean-up: stop engine worker processes (vLLM's engine
        # core) ourselves so none outlives the command.
        import multiprocessing

        for child in multiprocessing.active_children():
            with contextlib.suppress(Exception):
                child.terminate()
        os._exit(code)

    # -- helpers ----------------------------------------------------------------------------------

    def _claim(self) -> bool:
        """True for the first caller only: the one that may write the answer."""
        return self._answered.acquire(blocking=False)

    def _write_json(self, result: PruneResult, stored_id: str | None) -> None:
        payload = result.to_dict()
        payload["store_id"] = stored_id
        self._emit(json.dumps(payload, ensure_ascii=False).encode("utf-8", errors="replace") + b"\n")

    def _emit(self, data: bytes) -> None:
        self.wrote = True
        self.out.write(data)

    def _read_rest_text(self) -> str:
        data = self.input.data + (self.input.rest.read() if self.input.rest is not None else b"")
        self.input = _Input(data)
        return data.decode("utf-8", errors="replace")

    def _stats(self, result: PruneResult) -> None:
        if not self.args.stats:
            return
        total_chars = len(self.input.data.decode("utf-8", errors="replace"))
        kept_chars = sum(len(line) + 1 for line in _kept_lines(self.input.data, result.spans))
        elapsed_ms = (time.perf_counter() - self.started) * 1000
        model_tokens = (f"; model tokens in {result.input_tokens}, out {result.output_tokens}"
                        if result.input_tokens or result.output_tokens else "")
        _note(f"{self.settings.backend} kept {result.kept_lines}/{result.total_lines} lines "
              f"({_share(result.kept_lines, result.total_lines)}), ~{kept_chars // 4}/{total_chars // 4} tokens "
              f"(characters/4){model_tokens}; {elapsed_ms:.0f} ms total, backend start "
              f"{self.load_s * 1000:.0f} ms, pruning {result.latency_ms:.0f} ms")

    def _cli_settings(self) -> dict[str, Any]:
        given = vars(self.args)
        return {name: given[name] for name in settings_mod.FIELDS if name in given}

    def _read_input(self, limit: int) -> _Input:
        if self.args.input_file:
            try:
                handle = open(self.args.input_file, "rb")
            except OSError as error:
                raise UsageError(f"cannot read --input-file {self.args.input_file}: {error.strerror}") from None
        else:
            if sys.stdin is None or sys.stdin.isatty():
                raise UsageError("no input: pipe a command's output into squeez (cmd | squeez \"query\") "
                                 "or pass --input-file FILE")
            handle = sys.stdin.buffer
        data = handle.read(limit + 1)
        if len(data) > limit:
            return _Input(data, rest=handle)
        return _Input(data)


def _kept_lines(data: bytes, spans: list[list[int]]) -> Iterator[str]:
    lines = split_lines(data.decode("utf-8", errors="replace"))
    for start, end in spans:
        yield from lines[start - 1:end]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"
