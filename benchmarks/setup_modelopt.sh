#!/usr/bin/env bash
# The peer environment for NVIDIA Model Optimizer's ONNX PTQ (SPEC §9), kept out of fasterquant's dependencies:
# benchmarks/deploy.py runs ModelOpt in this venv, in a subprocess, on the float ONNX files it writes.
# Usage: bash benchmarks/setup_modelopt.sh [VENV]   (default: .venv-modelopt at the repo root, git-ignored; ~2 GB)
# torch 2.13.0 is the CPU wheel (ModelOpt imports torch even for ONNX PTQ; the 2.14.1 CUDA build also works but is ~5.5 GB);
# the [onnx] extra brings onnx, onnxruntime-gpu (whose CPU execution provider is what runs here), polygraphy, onnx-graphsurgeon, cupy.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/.venv-modelopt}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python
if [ ! -x "$VENV/bin/python" ]; then "$PY" -m venv "$VENV"; fi
"$VENV/bin/pip" install -q --upgrade pip wheel
"$VENV/bin/pip" install -q "torch==2.13.0"
"$VENV/bin/pip" install -q "nvidia-modelopt[onnx]==0.47.0"
"$VENV/bin/python" - <<'PY'
import modelopt, onnx, onnxruntime, torch
from modelopt.onnx.quantization import quantize
print("modelopt", modelopt.__version__, "onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, "torch", torch.__version__)
PY
