"""Terminal progress: drawn in place on a terminal, silent in logs and CI."""

from __future__ import annotations

import io

from squeez_ray.progress import Progress, progress_enabled


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_quiet_when_not_a_terminal(monkeypatch):
    monkeypatch.delenv("SQUEEZ_PROGRESS", raising=False)
    log = io.StringIO()
    with Progress("label", total=3, stream=log) as progress:
        progress.update(3, dropped=1)
    assert log.getvalue() == "" and not progress_enabled(log)


def test_drawn_in_place_on_a_terminal_with_the_jobs_figures(monkeypatch):
    monkeypatch.delenv("SQUEEZ_PROGRESS", raising=False)
    screen = FakeTerminal()
    with Progress("evaluate bm25", total=4, unit="examples", stream=screen, min_interval_s=0) as progress:
        progress.update(2, unpruned=0)
        progress.update(2, unpruned=1, loss=0.123456)
    text = screen.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1 and text.count("\r") >= 3  # one line, redrawn
    last = text.rsplit("\r", 1)[1]
    assert last.startswith("evaluate bm25: 4/4 examples (100%)") and "unpruned 1" in last and "loss 0.1235" in last


def test_environment_forces_it(monkeypatch):
    monkeypatch.setenv("SQUEEZ_PROGRESS", "0")
    assert not progress_enabled(FakeTerminal())
    monkeypatch.setenv("SQUEEZ_PROGRESS", "1")
    assert progress_enabled(io.StringIO())


def test_without_a_total_it_counts():
    progress = Progress("collect", unit="tool calls", enabled=False)
    progress.update(5, written=4)
    assert progress.line().startswith("collect: 5 tool calls, ") and progress.line().endswith("written 4")
