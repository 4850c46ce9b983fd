#!/usr/bin/env bash
# One GPU check -> one JSON report (see scripts/gpu_check.py for the stages).
#   scripts/gpu_check.sh [--out gpu_check_report.json] [--dry-run] [--in-process] [--skip vllm,serve]
# On a GPU machine that reaches the package registry it first installs the GPU set (CUDA vllm 0.32,
# flash-linear-attention, then causal-conv1d built against that torch); on an air-gapped one it uses what
# is there (torch, transformers, peft, accelerate at least) and the report says which stages it skipped and why.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
dry_run=0
for arg in "$@"; do [[ "$arg" == "--dry-run" ]] && dry_run=1; done

if [[ $dry_run == 0 ]] && command -v nvidia-smi >/dev/null 2>&1; then
  if "$PYTHON" -m pip index versions vllm >/dev/null 2>&1; then
    echo "gpu_check: installing the GPU set (constraints-gpu.txt)" >&2
    "$PYTHON" -m pip install -q -c constraints-gpu.txt -e ".[gpu,deepspeed]" setuptools wheel ninja packaging
    "$PYTHON" -m pip install -q -c constraints-gpu.txt --no-build-isolation causal-conv1d
  else
    echo "gpu_check: no package registry reachable; using the installed packages" >&2
  fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" scripts/gpu_check.py "$@"
