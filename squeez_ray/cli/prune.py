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
- With nothing configured the backend is the encoder shipped in the package (``settings.DEFAULT_BACKEND``,
  ONNX on the CPU); a model or server URL set without a backend is an error that lists the choices
  (``settings.CONFIGURE_HELP``), never a silent BM25.
- Configuration errors exit 2 with a message saying how to fix them, and still pass the input
  through (unless ``--strict``) so a pipe never loses output.
- A model that keeps nothing of an output not clearly beside the query answers with a bounded
  head-and-tail sample instead, marked in the footer (``pruning.never_empty``).
- The full output of every pruned call is kept in a local store (``store.py``) and ``squeez show
  ID`` prints it back byte-exact.

- A usage mistake (bad flag) passes the input through too (exit 2; ``args.py``); SIGINT, SIGTERM and
  SIGHUP pass through the input read so far and exit 128 + n (``signals.py``, ``on_signal``).

Exit codes: 0 answered (pruned or passed through), 1 backend failure under ``--strict``, 2 usage
or configuration error, 128 + n ended by signal n (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli import signals
from squeez_ray.cli.args import UsageError, build_parser, parse_arguments  # noqa: F401 - build_parser: public
from squeez_ray.cli.intake import CHUNK as _CHUNK
from squeez_ray.cli.intake import Input as _Input
from squeez_ray.cli.intake import model_text, open_input, read_capped
from squeez_ray.cli.pipe import (
    EXIT_BACKEND,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PassThrough,
)
from squeez_ray.cli.markers import render_marked
from squeez_ray.cli.pipe import note as _note
from squeez_ray.cli.pipe import release as _release
from squeez_ray.cli.pipe import reserved_stdout as _reserved_stdout
from squeez_ray.cli.pruning import call_backend, footer_notes, input_gate, keep_full_output
from squeez_ray.config import ConfigError
from squeez_ray.infer.base import PruneResult, unpruned_result
from squeez_ray.spans import render, split_lines


ANSWER_GRACE_S = 5.0  # how long a signal waits for an answer being written before ending the process


def main(argv: list[str], misread: bool = False) -> int:
    """``misread``: the line named a subcommand that its words did not fit (subcommands.py); read as the
    query, it is still a usage error when no input came."""
    args, usage_error = parse_arguments(argv)
    with _reserved_stdout() as (out, owned):
        run = _Run(args, out, release_early=owned, usage_error=usage_error, misread=misread)
        with signals.watch(run.on_signal):
            try:
                return run.run()
            except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
                return EXIT_OK
            except KeyboardInterrupt:  # Ctrl-C where no handler could be installed (not the main thread)
                return run.answer_anyway("interrupted", EXIT_INTERRUPTED)
            except Exception as error:  # noqa: BLE001 - a bug of ours after the input was read: never leave the pipe empty
                return run.answer_anyway(f"internal error ({type(error).__name__}: {error})", EXIT_BACKEND)
            finally:
                run.answered.set()


class _Run:
    """One invocation. Once the watchdog runs, ``_claim`` makes sure exactly one answer reaches
    stdout, even when it and the main thread finish at the same moment."""

    def __init__(self, args: argparse.Namespace, out: IO[bytes], release_early: bool = False,
                 usage_error: str | None = None, misread: bool = False):
        self.args = args
        self.usage_error = usage_error
        self.misread = misread
        self.out = out
        self.release_early = release_early  # ``out`` is ours to close once answered
        self.started = time.perf_counter()
        self._answered = threading.Lock()
        self._owner: int | None = None  # the thread that holds ``_answered``
        self.answered = threading.Event()  # set once the answer is written (a signal then only ends the process)
        self.reading = bytearray()  # the input as read so far: what a signal during reading passes through
        self.streaming = False  # a pass-through is streaming the unread input (a signal ends it there)
        self.passing: PassThrough | None = None  # that stream
        self.settings: settings_mod.Settings | None = None
        self.input = _Input(b"")
        self.load_s = 0.0
        self.input_read = False
        self.wrote = False  # something reached ``out`` already (then a late failure cannot restart the answer)
        self.stored: tuple[str | None, str | None] | None = None  # (store id, note) once the store was tried

    # -- flow -------------------------------------------------------------------------------------

    def run(self) -> int:
        config_error = self.usage_error
        try:
            self.settings = settings_mod.resolve(self._cli_settings(), config_path=self.args.config)
        except ConfigError as error:
            config_error = config_error or str(error)
        except Exception as error:  # noqa: BLE001 - unreadable settings must not cost the output: say what failed
            config_error = config_error or f"cannot load the settings ({type(error).__name__}: {error})"
        max_mb = self.settings.max_input_mb if self.settings else settings_mod.CommandSettings.max_input_mb
        try:
            self.input = read_capped(open_input(self.args.input_file), int(max_mb * (1 << 20)), self.reading)
        except UsageError as error:
            _note(f"{self.usage_error}\n{error}" if self.usage_error else str(error))
            return EXIT_USAGE
        self.input_read = True
        self.reading = bytearray()
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
            code = self._answer_empty()
            return EXIT_USAGE if self.misread else code  # no input came: the misread line was a usage error
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
        text = model_text(self.input.data)  # what the model reads: long lines cut (intake.py)
        watchdog = threading.Timer(s.timeout_s, self._on_timeout)
        watchdog.daemon = True
        watchdog.start()
        pruner = None
        try:
            result, failure, pruner, self.load_s = call_backend(s, self.args.query, text)
            watchdog.cancel()
            self._hold()
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
            if self.wrote:
                self.answered.set()
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
        return f"[squeez: {kept} ({self.settings.backend}{footer_notes(result)}); {where}]"

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
        backend = self.settings.backend if self.settings else None
        if self.input.rest is not None:  # too big to hold: streamed as it arrives (into "text" with --json)
            self._hold()
            fields = unpruned_result("", reason, model=backend).to_dict() | {"store_id": None} \
                if self.args.json else None
            self.passing = PassThrough(self.out, self.input.data, self.input.rest, fields, _CHUNK)
            self.streaming = self.wrote = True
            self.passing.run()
        elif self.args.json:
            stored_id = self._keep_full_output()[0] if keep else None
            self._write_json(unpruned_result(self.input.data.decode("utf-8", errors="replace"), reason,
                                             model=backend), stored_id)
        else:
            self._emit(self.input.data)
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
            self._hold()
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
        try:
            code = self._backend_failed(reason)
        except (OSError, ValueError) as error:  # a closed reader, a full disk: say so, and still end now
            code = EXIT_OK if isinstance(error, BrokenPipeError) else EXIT_BACKEND
            _note(f"{reason}; cannot write the output: {getattr(error, 'strerror', None) or error}")
        self._exit_now(code)

    def on_signal(self, signum: int) -> None:
        """Watcher thread (signals.py), on SIGINT / SIGTERM / SIGHUP: unless an answer is already being
        written, write the input read so far, unpruned; then end the process with 128 + ``signum``."""
        code, name = 128 + signum, signal.Signals(signum).name
        if self._claim():
            strict = bool(self.settings.strict) if self.settings else bool(self.args.strict)
            data = self.input.data if self.input_read else bytes(self.reading)
            whole = self.input_read and self.input.rest is None
            reason = f"interrupted by {name}: " + ("the full output" if whole else f"the {len(data)} bytes read so far")
            if strict:
                _note(f"interrupted by {name} (--strict: no output)")
            else:
                with contextlib.suppress(OSError, ValueError):
                    if self.args.json:
                        backend = self.settings.backend if self.settings else None
                        text = data.decode("utf-8", errors="replace")
                        self._write_json(unpruned_result(text, reason + " passed through", model=backend), None)
                    else:
                        self._emit(data)
                _note(reason + " passed through unpruned")
        elif not self.streaming:
            # The main thread is writing its answer: let it finish first, but not forever (a reader
            # that stopped reading must not make the signal wait).
            self.answered.wait(ANSWER_GRACE_S)
            signals.end_process(code)  # not _exit_now: its flush would wait on the writer's lock
        else:  # a pass-through stream of input still arriving: end it with every byte read so far
            self.passing.stop(f"interrupted by {name}: the output read so far passed through unpruned",
                              wait_s=ANSWER_GRACE_S)
            _note(f"interrupted by {name}: the output read so far passed through unpruned")
            signals.end_process(code)
        self._exit_now(code)

    def _exit_now(self, code: int) -> None:
        with contextlib.suppress(Exception):
            self.out.flush()
        signals.end_process(code)

    # -- helpers ----------------------------------------------------------------------------------

    def _claim(self) -> bool:
        """True for the first thread to ask (and again for it): the one that may write the answer."""
        if self._owner == threading.get_ident():
            return True
        if self._answered.acquire(blocking=False):
            self._owner = threading.get_ident()
            return True
        return False

    def _hold(self) -> None:
        """Claim the answer, or (the watchdog or a signal has it, and will end the process) wait for the end."""
        if not self._claim():
            threading.Event().wait()

    def _write_json(self, result: PruneResult, stored_id: str | None) -> None:
        payload = result.to_dict()
        payload["store_id"] = stored_id
        self._emit(json.dumps(payload, ensure_ascii=False).encode("utf-8", errors="replace") + b"\n")

    def _emit(self, data: bytes) -> None:
        self._hold()
        self.wrote = True
        self.out.write(data)

    def _stats(self, result: PruneResult) -> None:
        if not self.args.stats:
            return
        from squeez_ray.cli import daemon_client
        total_chars = len(self.input.data.decode("utf-8", errors="replace"))
        kept_chars = sum(len(line) + 1 for line in _kept_lines(self.input.data, result.spans))
        elapsed_ms = (time.perf_counter() - self.started) * 1000
        model_tokens = (f"; model tokens in {result.input_tokens}, out {result.output_tokens}"
                        if result.input_tokens or result.output_tokens else "")
        _note(f"{self.settings.backend} kept {result.kept_lines}/{result.total_lines} lines "
              f"({_share(result.kept_lines, result.total_lines)}), ~{kept_chars // 4}/{total_chars // 4} tokens "
              f"(characters/4){model_tokens}; {elapsed_ms:.0f} ms total, backend start "
              f"{self.load_s * 1000:.0f} ms, pruning {result.latency_ms:.0f} ms ({daemon_client.route})")

    def _cli_settings(self) -> dict[str, Any]:
        given = vars(self.args)
        return {name: given[name] for name in settings_mod.FIELDS if name in given}

def _kept_lines(data: bytes, spans: list[list[int]]) -> Iterator[str]:
    lines = split_lines(data.decode("utf-8", errors="replace"))
    for start, end in spans:
        yield from lines[start - 1:end]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"
