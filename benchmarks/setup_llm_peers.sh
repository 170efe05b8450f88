#!/usr/bin/env bash
# The peer environment for decoder-LLM weight quantization (issue: decoder LLMs, item 5), kept out of fasterquant's dependencies:
# Intel AutoRound 0.16.1 (sign-gradient rounding) and HQQ 0.2.8 (half-quadratic, calibration-free), run by benchmarks/llm_peers.py.
# Usage: bash benchmarks/setup_llm_peers.sh [VENV]   (default: .venv-llm-peers at the repo root, git-ignored)
# The venv sees the system site-packages, so torch, transformers (with gguf and accelerate) and fasterquant itself are reused;
# a constraints file pins torch and transformers so the peers' resolvers cannot replace them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/.venv-llm-peers}"
PIN="$(mktemp)"; trap 'rm -f "$PIN"' EXIT
python - > "$PIN" <<'PY'
import torch, transformers
print(f"torch=={torch.__version__.split('+')[0]}\ntransformers=={transformers.__version__}")
PY
if [ ! -x "$VENV/bin/python" ]; then python -m venv --system-site-packages "$VENV"; fi
"$VENV/bin/pip" install -q -c "$PIN" "auto-round==0.16.1" "hqq==0.2.8.post1"
"$VENV/bin/python" - <<'PY'
import auto_round, hqq, torch, transformers, fasterquant
print("auto-round", auto_round.__version__, "hqq", getattr(hqq, '__version__', '0.2.8'), "torch", torch.__version__, "transformers", transformers.__version__)
PY
