"""Shared fixtures. Markers come from the folder a test lives in (unit / integration / gpu); integration and gpu
tests run in one of two cluster streams (below) unless marked ``no_cluster``."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from squeez_ray.ray_init import EMBEDDED_SYSTEM_CONFIG

REPO = Path(__file__).resolve().parents[1]
# The shared, read-only project data (eval cases, trajectories): ../shared beside the checkout, else the
# first `shared` folder further up (a git worktree nested deeper); SQUEEZ_SHARED (or the older
# SQUEEZ_TEST_SHARED) names it outright.
SHARED = Path(os.environ.get("SQUEEZ_SHARED") or os.environ.get("SQUEEZ_TEST_SHARED")
              or next((p / "shared" for p in REPO.parents if (p / "shared").is_dir()), REPO.parent / "shared"))

# The test session's processes cache what they compile, whatever PYTHONDONTWRITEBYTECODE says (these build
# machines set it): scripts/setup.sh caches only what its import check imports, and a module every Ray worker
# or vLLM process compiled again from source made a clean clone's tests ~50% slower. This process cannot
# change its own flag at start-up, only what it compiles from now on; its children start without it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Ray 2.60 clusters use token auth by default; test clusters run on loopback without it.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Every Ray the tests start (the streams' own, `ray start` heads, multi-node clusters, the jobs they run as
# subprocesses) gets squeez_ray.ray_init's EMBEDDED_SYSTEM_CONFIG (idle workers kept for reuse, no metrics)
# as Ray's RAY_<name> environment variables, so it also reaches Rays started outside start_local. Test-only:
# the log monitor globs for new log files every 2 s, not every 0.1 s, and a new driver does not prestart
# workers it may never use. CPU bounds CI on 2 cores; with these, a per-process CPU sample of a clean-clone
# run (2026-11-28) went from 4,704 to 4,175 core-s (Ray's log monitors 149 -> 51) and pytest from 39.8 to 34.9 min.
_RAY_ENV = {f"RAY_{name}": str(int(value)) for name, value in EMBEDDED_SYSTEM_CONFIG.items()}
_RAY_ENV.update({"RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0", "LOG_NAME_UPDATE_INTERVAL_S": "2",
                 "RAY_prestart_worker_first_driver": "0"})
for _name, _value in _RAY_ENV.items():
    os.environ.setdefault(_name, _value)
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No test leaves a warm pruner process behind (squeez_ray/cli/daemon.py): calls prune in their own process
# unless a test turns it on; one started anyway lives in this run's own runtime folder, and removing that
# folder at exit removes its socket, on which it exits.
os.environ["SQUEEZ_DAEMON"] = "0"
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="squeez-test-run-")
atexit.register(shutil.rmtree, os.environ["XDG_RUNTIME_DIR"], True)


# The integration and gpu tests that start Ray, Serve or vLLM run in two streams, each an xdist group: one
# worker runs a stream's tests in turn, and its local Ray (the session fixture ray_local) is that worker's
# own, so the two streams run side by side as two clusters with separate ports (every test picks free
# ports; the quickstart alone takes Serve's 8000). Two streams, because one such test mostly keeps one
# core busy (a vLLM engine on its 1-CPU bundle, one Ray Train worker, Ray Data's start-up), so a single
# stream left a core idle for most of CI. They are balanced by CI's own durations (--durations=25 at the
# end of its log); a module not named here runs in the "cluster-serve" stream. pyproject.toml's -n 3 gives
# the unit tests the third worker: the scheduler hands the two largest groups out first. Ray's workers keep
# their default nice 15. Measured at 0 (RAY_worker_niceness), clean clones, 2026-11-28: two streams 37.0 min
# of pytest (CI at 15: 39.3) with one error (a `ray start` head's dashboard missed Ray's 60 s); a third
# stream for the Gemma modules 36.5, green, then 41.2 with two timing-bound failures at load average 20.
# Both cores are busy to the end at either niceness: the suite needs less work, not another order.
# test_label_vllm (Gemma 270M on vLLM) runs in the serve stream, in turn with the quickstart's Gemma
# training and serving: in the train stream its synthesis test failed beside them in a clean-clone run.
# Sums of one warm run's durations (2026-11-28, minutes): serve 38.2 and train 29.6 with test_multinode
# (5.0) in the serve stream, so it runs in the train stream (where it passed in earlier runs). A clean-clone
# run of e90a510 (2026-11-28, per-test timestamps): the serve stream ended at 40.0 min, the train stream
# at 33.2, so test_serve_model (3.4 min there; its Serve takes a free port) moved to the train stream.
TRAIN_STREAM = frozenset({
    "test_bulk_eval_engines.py", "test_gpu_check_dry_run.py", "test_handlabel_pipeline.py", "test_label_http.py",
    "test_label_job.py", "test_preflight.py", "test_train_job_submit.py",
    "test_train_lora.py", "test_train_ray.py", "test_encoder_train.py", "test_encoder_data.py", "test_multinode.py",
    "test_serve_model.py",
})


def cluster_stream(module: str) -> str:
    """The xdist group of a test module that starts Ray, Serve or vLLM."""
    return "cluster-train" if module in TRAIN_STREAM else "cluster-serve"


# tryfirst: xdist's worker reads the xdist_group marks in its own collection hook, which pluggy would
# otherwise call before this one (it registers later), and the cluster tests would spread over all workers.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts and parts[0] in ("unit", "integration", "gpu"):
            item.add_marker(getattr(pytest.mark, parts[0]))
        if parts and parts[0] in ("integration", "gpu") and not item.get_closest_marker("no_cluster"):
            item.add_marker(pytest.mark.xdist_group(cluster_stream(parts[-1])))
        if parts and parts[0] == "gpu":
            try:
                import torch

                has_cuda = torch.cuda.is_available()
            except ImportError:
                has_cuda = False
            if not has_cuda:
                item.add_marker(pytest.mark.skip(reason="needs CUDA"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: tests read the shared eval cases and trajectories from there")
    return SHARED


@pytest.fixture(scope="session")
def public_cases_path(shared_dir: Path) -> Path:
    return shared_dir / "eval" / "public_cases.jsonl"


@pytest.fixture(scope="session")
def trajectories_dir(shared_dir: Path) -> Path:
    return shared_dir / "trajectories"


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory) -> Path:
    """A random-weight tiny Qwen3 checkpoint + local tokenizer, built once per test run (no download)."""
    from squeez_ray.train.tiny import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="session")
def tiny_qwen35_dir(tmp_path_factory) -> Path:
    """A random-weight tiny Qwen 3.5 hybrid (linear + full attention) checkpoint for the training path."""
    from squeez_ray.train.tiny import build_tiny_qwen35

    return build_tiny_qwen35(tmp_path_factory.mktemp("tiny-qwen35"))


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray for the whole session (2 CPUs, no dashboard): starting Ray costs seconds."""
    import ray

    from squeez_ray.ray_init import start_local

    if not ray.is_initialized():  # start_local: once more if the node times out at start (a loaded machine)
        start_local(dict(num_cpus=2, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled", "VLLM_CPU_KVCACHE_SPACE": "1",
                                                   "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}}))
    yield ray
    try:
        from ray import serve

        serve.shutdown()
    except Exception:  # noqa: BLE001, S110 - Serve never started, or is already down: Ray's shutdown still runs
        pass
    ray.shutdown()


GOLDEN_PROMPTS = REPO / "tests" / "fixtures" / "released_prompt_golden.jsonl"


@pytest.fixture(scope="session")
def golden_rows() -> list[dict]:
    """The released checkpoint's prompt / response / training-text bytes (copy of ../shared/compat)."""
    import json

    return [json.loads(line) for line in GOLDEN_PROMPTS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def gemma_270m_dir() -> Path:
    """Gemma 3 270M (the registry package's GGUF), converted once into the model cache
    ($SQUEEZ_MODEL_CACHE or ~/.cache/squeez/models) and reused by every later session (~1.5 min first)."""
    from squeez_ray.base_models import BaseModelError, materialize

    try:
        return materialize("gemma-3-270m")
    except BaseModelError as error:
        pytest.fail(str(error))
