"""Per-unit re-pruning without Ray: failures counted and left unpruned, pass-through rules, resume."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence

from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.infer.base import Pruner, PruneRequest, PruneResult, RenderOptions
from squeez_ray.trajectories.process import (
    RepruneSettings,
    process_units,
)
from squeez_ray.trajectories.resume import is_done, marker_path

SWE = "swe-agent/pydicom__pydicom-1458.traj"
MINI = "mini-swe-agent/django__django-15104.v1.15.0.traj.json"


class FailsOnTracebacks(Pruner):
    """BM25, except that any output holding a traceback makes the whole batch raise."""

    name = "fails-on-tracebacks"

    def __init__(self):
        self.bm25 = build_pruner("bm25")
        self.batches: list[int] = []

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        self.batches.append(len(requests))
        if any("Traceback" in r.tool_output for r in requests):
            raise RuntimeError("engine fell over")
        return self.bm25._prune_batch(requests, render_options)


def settings(trajectories_dir, out, **changes) -> RepruneSettings:
    return RepruneSettings(input_dir=str(trajectories_dir), output_dir=str(out), **changes)


def test_a_failing_observation_stays_unpruned_and_is_reported(trajectories_dir, tmp_path):
    pruner = FailsOnTracebacks()
    [stats] = process_units([SWE], pruner, settings(trajectories_dir, tmp_path, min_lines=2))
    assert stats.failed > 0 and stats.pruned > 0 and stats.status == "pruned"
    assert pruner.batches[0] > 1 and pruner.batches.count(1) >= stats.failed  # retried one by one
    assert stats.observations == stats.pruned + stats.passed_through + stats.failed
    original = json.loads((trajectories_dir / SWE).read_text())["trajectory"]
    written = json.loads((tmp_path / SWE).read_text())["trajectory"]
    failed_steps = {int(f["where"].split("[")[1].split("]")[0]) for f in stats.failures}
    assert all("engine fell over" in f["error"] for f in stats.failures)
    for step in failed_steps:
        assert "Traceback" in original[step]["observation"]
        assert written[step]["observation"] == original[step]["observation"]
    assert any(a["observation"] != b["observation"] for a, b in zip(original, written))


def test_short_outputs_pass_through_and_markers_are_optional(trajectories_dir, tmp_path):
    bm25 = build_pruner("bm25")
    [with_markers] = process_units([MINI], bm25, settings(trajectories_dir, tmp_path / "a"))
    [without] = process_units([MINI], bm25, settings(trajectories_dir, tmp_path / "b", markers=False))
    assert with_markers.reasons["below min_lines=10"] == without.reasons["below min_lines=10"] > 0
    assert "lines omitted]" in (tmp_path / "a" / MINI).read_text()
    assert "lines omitted]" not in (tmp_path / "b" / MINI).read_text()
    [everything] = process_units([MINI], bm25, settings(trajectories_dir, tmp_path / "c", min_lines=1000))
    assert everything.pruned == 0 and (tmp_path / "c" / MINI).read_bytes() == (trajectories_dir / MINI).read_bytes()


def test_a_unit_is_done_only_when_its_output_matches_the_marker(trajectories_dir, tmp_path):
    process_units([SWE], build_pruner("bm25"), settings(trajectories_dir, tmp_path))
    assert is_done(str(tmp_path), SWE)["unit"] == SWE
    (tmp_path / SWE).write_bytes((tmp_path / SWE).read_bytes()[:100])  # damaged after the marker: redo
    assert is_done(str(tmp_path), SWE) is None
    marker_path(str(tmp_path), SWE).unlink()
    assert is_done(str(tmp_path), SWE) is None


def test_fixed_query_source_sends_the_given_query(trajectories_dir, tmp_path):
    seen: list[str] = []

    class Recorder(Pruner):
        def _prune_batch(self, requests, render_options):
            seen.extend(r.query for r in requests)
            return build_pruner("bm25")._prune_batch(requests, render_options)

    process_units([SWE], Recorder(), settings(trajectories_dir, tmp_path, query_source="fixed", query="the error"))
    assert seen and set(seen) == {"the error"}


def _job_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "jobs" / "reprune.py"
    spec = importlib.util.spec_from_file_location("reprune_job", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.parent / "configs" / "reprune.yaml"


def test_the_shipped_config_loads_and_flags_override_it(tmp_path):
    job, shipped = _job_module()
    missing = tmp_path / "missing"
    args = job.parse_args(["--config", str(shipped), "--input", str(missing), "--output", "out", "--workers", "3"])
    config = job.config_from_args(args)
    assert config.validate() == [f"input {missing} is not a directory"]  # every other value is valid
    assert (config.backend, config.workers, config.gpus_per_worker) == ("vllm", 3, 1)
    assert config.options.engine_kwargs["max_model_len"] == 32768 and config.options.min_lines == 0
    assert config.settings.min_lines == 10 and config.settings.markers is True
    bad = tmp_path / "bad.yaml"
    bad.write_text("workerz: 2\n")
    try:
        job.parse_args(["--config", str(bad), "--input", "a", "--output", "b"])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        raise AssertionError("an unknown key must be refused")


def test_tokens_are_counted_with_the_given_counter(trajectories_dir, tmp_path):
    from squeez_ray.trajectories.process import chars_over_4
    from squeez_ray.trajectories.report import summarize

    bm25 = build_pruner("bm25")
    [words] = process_units([SWE], bm25, settings(trajectories_dir, tmp_path / "a"), lambda text: len(text.split()))
    [chars] = process_units([SWE], bm25, settings(trajectories_dir, tmp_path / "b"))
    observations = json.loads((trajectories_dir / SWE).read_text())["trajectory"]
    assert words.tokens_before == sum(len(step["observation"].split()) for step in observations)
    assert chars.tokens_before == sum(chars_over_4(step["observation"].removesuffix("\n")) for step in observations)
    assert words.tokens_after < words.tokens_before
    summary = summarize([{**vars(words), "status": "pruned"}], "words (a test counter)")
    assert summary["total"]["tokens_before"] == words.tokens_before and summary["token_note"].startswith("words")


def test_resuming_into_an_output_made_with_other_settings_is_refused(trajectories_dir, tmp_path):
    import pytest

    from squeez_ray.trajectories.pipeline import (
        RepruneConfig,
        RepruneError,
        _check_same_settings,
    )

    def config(**changes):
        return RepruneConfig(settings=settings(trajectories_dir, tmp_path), **changes)

    _check_same_settings(config(backend="bm25", workers=1))
    _check_same_settings(config(backend="bm25", workers=2, files_per_batch=9))  # speed knobs may change
    with pytest.raises(RepruneError, match="backend: 'bm25' -> 'first'"):
        _check_same_settings(config(backend="first"))


def _resetting_server() -> tuple[str, list[int], threading.Event]:
    """A loopback port that accepts each connection and closes it unanswered (a server that is down
    behind its socket); counts the connections it got."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    seen, stop = [0], threading.Event()

    def serve() -> None:
        with listener:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                seen[0] += 1
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", seen, stop


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed when the block ends: nothing listens


def test_a_down_server_fails_fast_instead_of_retrying_every_observation(trajectories_dir, tmp_path):
    url, seen, stop = _resetting_server()
    pruner = build_pruner("server", BackendOptions(server_url=url, max_retries=1, batch_size=4))
    try:
        [stats] = process_units([SWE], pruner, settings(trajectories_dir, tmp_path, min_lines=2, batch_size=8))
    finally:
        stop.set()
    assert stats.failed > 2 * 3 and stats.pruned == 0  # every observation left as it was
    # Without the circuit: (batch + each observation alone) x 2 attempts each, over 60 connections here.
    assert seen[0] <= 3 * 2, seen[0]
    assert all("unreachable" in f["error"] or url in f["error"] for f in stats.failures)
    assert (tmp_path / SWE).read_bytes() == (trajectories_dir / SWE).read_bytes()


def test_a_closed_port_reports_the_server_as_unreachable(trajectories_dir, tmp_path):
    url = _closed_port()
    pruner = build_pruner("server", BackendOptions(server_url=url, max_retries=0))
    [stats] = process_units([SWE], pruner, settings(trajectories_dir, tmp_path, min_lines=2))
    assert stats.failed == stats.observations - stats.passed_through > 0
    assert "is unreachable" in stats.failures[-1]["error"] and url in stats.failures[-1]["error"]
